/* busy: an All-Pairs (two files) or Wavefront (three files) function that
 * spends BUSY_MS milliseconds of CPU time (default 10) and prints a checksum
 * of its input files. CPU time, not
 * wall-clock time, so that every call costs the machine the same whatever
 * else runs on it; the distributed benchmark's function. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned long sum(const char *path, unsigned long h) {
	FILE *f = fopen(path, "rb");
	int c;
	if (!f) {
		perror(path);
		exit(1);
	}
	while ((c = getc(f)) != EOF)
		h = h * 31 + (unsigned char)c;
	fclose(f);
	return h;
}

static double cpu(void) {
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	const char *ms = getenv("BUSY_MS");
	double busy = (ms ? atof(ms) : 10) / 1000, start = cpu();
	volatile unsigned long spin = 0;
	unsigned long h = 5381;
	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: busy A B [C]\n");
		return 2;
	}
	while (cpu() - start < busy)
		spin++;
	for (int i = 1; i < argc; i++)
		h = sum(argv[i], h);
	printf("%lu\n", h % 1000003);
	return 0;
}
