#include "text/g2p_lts.h"

namespace sotto::g2p {

std::string letters_to_sounds(std::string_view word, bool british) {
  (void)british;
  (void)word;
  return {};
}

}  // namespace sotto::g2p
