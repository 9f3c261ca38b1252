/* SPDX-License-Identifier: MIT */
/*
 * `ringfeed`: the command-line tool.  main() only dispatches: each subcommand
 * owns its options (tools/cmd_*.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ringfeed/ringfeed.h>

#include "cmd.h"
#include "util.h"

typedef struct rf_cli_cmd {
	const char *name;
	rf_cli_cmd_fn run;
	const char *summary;
} rf_cli_cmd;

/* One line per command, in the order `ringfeed --help` lists them; the
 * function is declared in cmd.h and its file listed in tools/meson.build. */
static const rf_cli_cmd commands[] = {
	{"pack", rf_cmd_pack, "pack .npy files, raw records or llm.c token shards into .rfs shards"},
	{"info", rf_cmd_info, "show a dataset's schema, counts, sizes and codec"},
	{"verify", rf_cmd_verify, "check every chunk, the index and the schema of a dataset"},
	{"export", rf_cmd_export, "write one field of every sample to a .npy file"},
	{"bench", rf_cmd_bench, "measure the loader's throughput against the machine's limits"},
	{"cat", rf_cmd_cat, "stream one field of every sample through the loader to stdout"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void
print_help(FILE *f)
{
	fprintf(f,
		"usage: ringfeed [--help] [--version] COMMAND [ARGS]\n"
		"\n"
		"Pack, inspect and check ringfeed datasets (.rfs shards).\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f,
		"\n"
		"Run 'ringfeed help COMMAND' or 'ringfeed COMMAND --help' for a command's options.\n"
		"Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

static const rf_cli_cmd *
find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static int
run_command(const rf_cli_cmd *cmd, int argc, char **argv)
{
	static char prog[64];

	snprintf(prog, sizeof prog, "ringfeed %s", cmd->name);
	rf_cli_prog = prog;
	return cmd->run(argc, argv);
}

/* RINGFEED_LOG=info or debug: the library's messages -v or -vv would show
 * (the options, parsed later, still decide). */
static void
verbosity_from_env(void)
{
	const char *env = getenv("RINGFEED_LOG");
	if (env && strcasecmp(env, "info") == 0)
		rf_cli_verbosity = 2;
	else if (env && strcasecmp(env, "debug") == 0)
		rf_cli_verbosity = 3;
}

int
main(int argc, char **argv)
{
	const rf_cli_cmd *cmd;

	verbosity_from_env();

	if (argc < 2) {
		print_help(stderr);
		return RF_CLI_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_help(stdout);
		return RF_CLI_OK;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("%s\n", rf_version_string());
		return RF_CLI_OK;
	}
	if (strcmp(argv[1], "help") == 0) {
		char *help_argv[3];
		if (argc < 3) {
			print_help(stdout);
			return RF_CLI_OK;
		}
		if (!(cmd = find_command(argv[2]))) {
			fprintf(stderr, "ringfeed help: unknown command '%s'\n", argv[2]);
			print_help(stderr);
			return RF_CLI_USAGE;
		}
		help_argv[0] = argv[2];
		help_argv[1] = (char *)"--help";
		help_argv[2] = NULL;
		return run_command(cmd, 2, help_argv);
	}
	if (argv[1][0] == '-') {
		fprintf(stderr, "ringfeed: unknown option '%s'\n", argv[1]);
		fprintf(stderr, "usage: ringfeed [--help] [--version] COMMAND [ARGS]\n");
		return RF_CLI_USAGE;
	}
	if (!(cmd = find_command(argv[1]))) {
		fprintf(stderr, "ringfeed: unknown command '%s'\n", argv[1]);
		print_help(stderr);
		return RF_CLI_USAGE;
	}
	return run_command(cmd, argc - 1, argv + 1);
}
