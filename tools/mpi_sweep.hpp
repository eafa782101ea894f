// A sweep spread over MPI ranks (Open MPI, optional at build time): `mpirun -np N bneck sweep ...`
// gives rank r the cases r, r + N, r + 2N, ...; rank 0 gathers every case's figures and writes the
// outputs, the others write nothing. The CSV equals a one-process sweep's (each case is
// deterministic). Active only under a launcher (OMPI_COMM_WORLD_SIZE or PMI_SIZE set).
#pragma once
#include <vector>

#include "models/whatif/sweep.hpp"

namespace bneck {

struct MpiWorld {
  int rank = 0, size = 1;
  bool active = false;
  MpiWorld();  // MPI_Init under a launcher; an InputError if launched with several ranks but built without MPI
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
};

// Rank 0 receives the results of every rank's share (the cases i with i % size == rank).
void mpi_gather_cases(const MpiWorld& w, std::vector<SweepCase>& cases);

}  // namespace bneck
