// The version is defined once (GK_VERSION_MAJOR/MINOR/PATCH in gradkern.h):
// GK_VERSION_STRING spells those numbers, the library's gk_version() returns
// it, and CMake's project version (GK_CMAKE_VERSION, passed by
// tests/CMakeLists.txt) was read from the same lines.
#include "harness.h"

int main(void) {
  char want[64];
  snprintf(want, sizeof want, "%d.%d.%d", GK_VERSION_MAJOR, GK_VERSION_MINOR, GK_VERSION_PATCH);
  check(!strcmp(GK_VERSION_STRING, want), "GK_VERSION_STRING '%s' spells the numbers %s", GK_VERSION_STRING, want);
  check(gk_version() && !strcmp(gk_version(), GK_VERSION_STRING), "gk_version() '%s' is the header's '%s'",
        gk_version() ? gk_version() : "(null)", GK_VERSION_STRING);
  check(!strcmp(GK_CMAKE_VERSION, GK_VERSION_STRING), "CMake's project version '%s' is the header's '%s'",
        GK_CMAKE_VERSION, GK_VERSION_STRING);
  return finish("test_version");
}
