/* What test_mpi_bind.sh runs under mpirun in a container: a ring (each rank passes a
 * token to the next, 3 times round), an allreduce (the sum of the ranks), and a 4 MiB
 * ping-pong between ranks 0 and 1 checking every byte. Rank 0 prints the MPI library's
 * version string first, so the test sees whose MPI ran (the image's or the host's), then
 * "ring ok", "allreduce ok", "pingpong ok 4194304 bytes". Built with mpicc.openmpi or
 * mpicc.mpich. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void fail(const char* what) {
  fprintf(stderr, "mpi_checks: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    for (int i = 0; i < len; i++)
      if (version[i] == '\n') version[i] = ' ';
    printf("library: %.*s\n", len > 120 ? 120 : len, version);
    printf("ranks: %d\n", size);
  }
  /* Ring: the token goes round three times, each rank adding one. */
  int token = 0;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int round = 0; round < 3; round++) {
    if (rank == 0) {
      MPI_Send(&token, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token++;
    } else {
      MPI_Recv(&token, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token++;
      MPI_Send(&token, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) {
    if (token != 3 * size) fail("ring: wrong token");
    printf("ring ok (token %d)\n", token);
  }
  /* Allreduce: every rank gets the sum of the ranks. */
  long mine = rank, sum = -1;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (sum != (long)size * (size - 1) / 2) fail("allreduce: wrong sum");
  if (rank == 0) printf("allreduce ok (sum %ld)\n", sum);
  /* Ping-pong, 4 MiB, over shared memory between ranks 0 and 1. */
  const int bytes = 4 << 20;
  unsigned char* buf = malloc(bytes);
  if (!buf) fail("out of memory");
  for (int rep = 0; rep < 3; rep++) {
    if (rank == 0) {
      for (int i = 0; i < bytes; i++) buf[i] = (unsigned char)(i * 7 + rep);
      MPI_Send(buf, bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
      MPI_Recv(buf, bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < bytes; i++)
        if (buf[i] != (unsigned char)(i * 7 + rep + 1)) fail("pingpong: bad data");
    } else if (rank == 1) {
      MPI_Recv(buf, bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < bytes; i++) buf[i]++;
      MPI_Send(buf, bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) printf("pingpong ok %d bytes\n", bytes);
  free(buf);
  MPI_Finalize();
  return 0;
}
