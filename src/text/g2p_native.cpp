#include "io/file.h"
#include "text/g2p.h"

namespace sotto::g2p {

Result<G2p> G2p::load_file(const std::string& path) {
  SOTTO_ASSIGN(MappedFile file, MappedFile::open(path));
  return load(file.bytes(), path);
}

}  // namespace sotto::g2p
