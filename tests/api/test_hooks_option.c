/* SPDX-License-Identifier: MIT */
/*
 * Description: the generated config.h says what the test_hooks option
 * chose (the build's answer, given as argv[1]: 1 or 0), and a test that
 * needs a hook skips (77) through RF_TEST_REQUIRE_HOOKS exactly when the
 * library has none.
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "rf_test.h"

int
main(int argc, char **argv)
{
	CHECK(argc == 2);
	CHECK(RF_TEST_HOOKS == (strcmp(argv[1], "1") == 0));
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		RF_TEST_REQUIRE_HOOKS("a hook");
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	CHECK(WEXITSTATUS(st) == (RF_TEST_HOOKS ? 0 : T_SKIP));
	return 0;
}
