// SPDX-License-Identifier: MIT
// Description: the public headers compile and link from C++.
#include <ringfeed/ringfeed.h>
#include <ringfeed/dataset.h>
#include <ringfeed/version.h>

int
main()
{
	return rf_version_string() == nullptr;
}
