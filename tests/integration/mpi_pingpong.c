/* MPI ping-pong between ranks 0 and 1, 8 B .. 4 MiB, checking every byte; prints one
 * line per size from rank 0 and "pingpong ok" at the end. Built by test_mpi.sh with mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int max = 4 << 20;
  unsigned char* buf = malloc(max);
  for (int size = 8; size <= max; size *= 2) {
    if (rank == 0) {
      for (int i = 0; i < size; i++) buf[i] = (unsigned char)(i * 7 + size);
      double t = MPI_Wtime();
      MPI_Send(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      t = MPI_Wtime() - t;
      for (int i = 0; i < size; i++)
        if (buf[i] != (unsigned char)(i * 7 + size + 1)) { fprintf(stderr, "bad data\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
      printf("%d bytes: %.1f us round trip\n", size, t * 1e6);
    } else if (rank == 1) {
      MPI_Recv(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < size; i++) buf[i]++;
      MPI_Send(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) printf("pingpong ok\n");
  free(buf);
  MPI_Finalize();
  return 0;
}
