// sparsepush/transport/mpi.hpp: nodes on MPI ranks (optional component sparsepush::mpi): the
// network's settings, timing and errors (mpi/options.hpp), and mpi_network with its endpoint
// (mpi/network.hpp, whose opening comment tells how it places nodes, tags frames and waits).
#pragma once

#include "mpi/options.hpp"
#include "mpi/network.hpp"
