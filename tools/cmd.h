/* SPDX-License-Identifier: MIT */
/*
 * The subcommands of the `ringfeed` tool.  Each is a function that takes the
 * command's own argv (argv[0] is the command name), parses it with
 * getopt_long, prints its help on --help (exit 0), and returns the process
 * exit status: 0 success, 1 runtime failure, 2 bad usage.
 *
 * Adding a command: write tools/cmd_NAME.c with `int rf_cmd_NAME(int, char **)`,
 * declare it below, add one line to the table in tools/ringfeed.c and one
 * file to tools/meson.build.
 */
#ifndef RF_CLI_CMD_H
#define RF_CLI_CMD_H

typedef int (*rf_cli_cmd_fn)(int argc, char **argv);

int rf_cmd_pack(int argc, char **argv);
int rf_cmd_info(int argc, char **argv);
int rf_cmd_verify(int argc, char **argv);
int rf_cmd_export(int argc, char **argv);
int rf_cmd_cat(int argc, char **argv);
int rf_cmd_bench(int argc, char **argv);

#endif
