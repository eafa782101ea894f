#include "tools/mpi_sweep.hpp"

#include <cstdlib>
#include <sstream>
#include <string>

#include "sim/base/error.hpp"

#ifdef BNECK_MPI
#include <mpi.h>
#endif

namespace bneck {

namespace {
int launcher_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}
}  // namespace

MpiWorld::MpiWorld() {
  const int n = launcher_size();
  if (n <= 0) return;
#ifdef BNECK_MPI
  int ok = 0;
  MPI_Initialized(&ok);
  if (!ok) MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  active = true;
#else
  if (n > 1)
    throw InputError("bneck sweep under an MPI launcher with " + std::to_string(n) +
                     " ranks, but this bneck was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

MpiWorld::~MpiWorld() {
#ifdef BNECK_MPI
  if (active) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }
#endif
}

void mpi_gather_cases(const MpiWorld& w, std::vector<SweepCase>& cases) {
#ifdef BNECK_MPI
  if (!w.active || w.size <= 1) return;
  std::ostringstream out;
  for (std::size_t i = static_cast<std::size_t>(w.rank); i < cases.size(); i += static_cast<std::size_t>(w.size)) {
    const SweepCase& c = cases[i];
    out << i << ' ' << c.baseline << ' ' << c.predicted;
    for (TimeNs b : c.by_bound) out << ' ' << b;
    out << ' ' << c.error.size() << ' ' << c.error << '\n';
  }
  const std::string mine = out.str();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(w.size)), offs(static_cast<std::size_t>(w.size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (w.rank == 0) {
    int total = 0;
    for (int r = 0; r < w.size; ++r) offs[static_cast<std::size_t>(r)] = total, total += lens[static_cast<std::size_t>(r)];
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (w.rank != 0) return;
  std::istringstream in(all);
  std::size_t i = 0;
  while (in >> i) {
    if (i >= cases.size()) throw InputError("mpi sweep: a rank sent case " + std::to_string(i) + " of " + std::to_string(cases.size()));
    SweepCase& c = cases[i];
    std::size_t elen = 0;
    in >> c.baseline >> c.predicted;
    for (TimeNs& b : c.by_bound) in >> b;
    in >> elen;
    in.get();
    c.error.resize(elen);
    if (elen) in.read(c.error.data(), static_cast<std::streamsize>(elen));
  }
#else
  (void)w;
  (void)cases;
#endif
}

}  // namespace bneck
