// hami-sim-pause: the process of a pod sandbox on the tests' real node (the node image's
// /pause). It holds the pod's namespaces open, reaps the orphans a shared PID namespace hands
// it, and exits on SIGINT or SIGTERM. Linked statically, so it runs in any image.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void Quit(int sig) { _exit(sig == SIGTERM ? 0 : 2); }

static void Reap(int sig) {
  (void)sig;
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

int main() {
  struct sigaction quit = {}, reap = {};
  quit.sa_handler = Quit;
  reap.sa_handler = Reap;
  reap.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGINT, &quit, nullptr) != 0 || sigaction(SIGTERM, &quit, nullptr) != 0 ||
      sigaction(SIGCHLD, &reap, nullptr) != 0) {
    return 1;
  }
  for (;;) pause();
}
