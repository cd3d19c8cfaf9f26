/* A small Wavefront cell program for the benchmarks: reads the three
 * neighbouring cells (decimal integers) from the files named on its command
 * line and prints their sum modulo 1000000007, so that values stay small. */
#include <stdio.h>
#include <stdlib.h>

static long long value(const char *path)
{
	FILE *f = fopen(path, "r");
	long long v = 0;
	if (!f) {
		perror(path);
		exit(1);
	}
	if (fscanf(f, "%lld", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "use: %s LEFT BELOW DIAG\n", argv[0]);
		return 2;
	}
	printf("%lld\n", (value(argv[1]) + value(argv[2]) + value(argv[3])) % 1000000007LL);
	return 0;
}
