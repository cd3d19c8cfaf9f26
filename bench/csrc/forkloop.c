/* forkloop N P PROG [ARGS...]: run PROG N times, P at a time, with plain
 * fork/execv/waitpid and standard output on /dev/null — the floor that a
 * process-per-cell engine is measured against. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: forkloop N P PROG [ARGS...]\n");
		return 2;
	}
	long n = atol(argv[1]), p = atol(argv[2]);
	int devnull = open("/dev/null", O_WRONLY);
	long started = 0, running = 0;
	while (started < n || running > 0) {
		while (running < p && started < n) {
			pid_t pid = fork();
			if (pid == 0) {
				dup2(devnull, 1);
				execv(argv[3], argv + 3);
				_exit(127);
			}
			if (pid < 0) {
				perror("fork");
				return 1;
			}
			started++;
			running++;
		}
		int status;
		if (wait(&status) > 0)
			running--;
	}
	return 0;
}
