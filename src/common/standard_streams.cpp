#include "ctr/standard_streams.hpp"

namespace ctr {

void initStandardStreams() { static const std::ios_base::Init streams; }

}  // namespace ctr
