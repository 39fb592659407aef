#include <chrono>

#include "api/clock.h"

namespace sotto {
double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace sotto
