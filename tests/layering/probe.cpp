// A scratch file of the layering check (tests/layering/CMakeLists.txt): it includes one header,
// named at configure time, with the include path of the module under test.
#include CTR_PROBE_HEADER

int ctrLayeringProbe() { return 0; }
