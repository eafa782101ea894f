#include "tools/output.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include "sim/base/error.hpp"

namespace bneck {

void write_output(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  if (path == "-") {
    fill(std::cout);
    std::cout.flush();
    return;
  }
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "cannot write (directory missing or not writable)");
    fill(out);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, "write failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path, "cannot replace the file");
  }
}

}  // namespace bneck
