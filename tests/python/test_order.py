# SPDX-License-Identifier: MIT
# Description: placeholder.
import sys
sys.exit(77)
