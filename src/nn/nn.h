// Shared by the training program's internal library (src/nn): errors are
// reported like the rest of gradkern, through gk_fail(), so gk_last_error()
// gives the message of whichever call failed.
#ifndef GK_NN_H
#define GK_NN_H

#include "../core/internal.h"

// The public status codes have no name for file problems yet; src/nn returns
// this one when a file cannot be opened, read or written, or its content is
// not what it must be. The message says which file and what was wrong.
#define GK_NN_ERR_FILE GK_ERR_INVALID_VALUE

// The plural ending of a count in a message: "1 step", "2 steps", "0 steps".
static inline const char *gk_plural(long long n) { return n == 1 ? "" : "s"; }

#endif
