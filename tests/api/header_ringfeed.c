/* SPDX-License-Identifier: MIT */
/* Description: <ringfeed/ringfeed.h> compiles on its own. */
#include <ringfeed/ringfeed.h>

int main(void);

int
main(void)
{
	return rf_version() == 0;
}
