/* SPDX-License-Identifier: MIT */
/* Description: <ringfeed/dataset.h> compiles on its own. */
#include <ringfeed/dataset.h>

int main(void);

int
main(void)
{
	rf_schema s = {0};
	return rf_schema_validate(&s) == 0; /* an empty schema is invalid */
}
