/* Calls keyctl(KEYCTL_GET_KEYRING_ID) and prints "errno=N" (0 on success): a seccomp
 * filter that refuses keyctl makes it fail with EPERM (1). Built -static by test_exec.sh and
 * bound into a busybox container. */
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  long r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
  printf("errno=%d\n", r < 0 ? errno : 0);
  return 0;
}
