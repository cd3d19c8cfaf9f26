/* nap: an All-Pairs (two files) or Wavefront (three files) function that
 * sleeps NAP_MS milliseconds (default 20) and prints 1. It waits rather than
 * computes, so that a cluster of many slots can be stood for by this 2-core
 * machine: the placement benchmark's function. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void) {
	const char *ms = getenv("NAP_MS");
	long n = ms ? atol(ms) : 20;
	struct timespec t = {n / 1000, (n % 1000) * 1000000L};
	nanosleep(&t, NULL);
	puts("1");
	return 0;
}
