/* A function that crashes on one call, for the tests of crash reports.
 *
 * allpairs_function crashes when both inputs start with "bad", and otherwise
 * returns the first byte of each input. wavefront_function returns the sum
 * of its three inputs (decimal integers), and crashes when that sum is
 * $CRASH_SUM. $CRASH_SIGNAL chooses how it crashes: segv (the default), bus,
 * fpe, ill or abrt. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void crash(void)
{
	const char *how = getenv("CRASH_SIGNAL");
	if (how == NULL || strcmp(how, "segv") == 0) {
		*(volatile int *)0 = 1;
	} else if (strcmp(how, "bus") == 0) {
		raise(SIGBUS);
	} else if (strcmp(how, "fpe") == 0) {
		volatile int n = 7, zero = 0;
		volatile int r = n / zero;
		(void)r;
	} else if (strcmp(how, "ill") == 0) {
		__builtin_trap();
	} else if (strcmp(how, "abrt") == 0) {
		abort();
	}
}

void *allpairs_function(const void *a, int alength, const void *b, int blength)
{
	if (alength >= 3 && blength >= 3 && memcmp(a, "bad", 3) == 0 && memcmp(b, "bad", 3) == 0)
		crash();
	char *out = malloc(3);
	if (out) {
		out[0] = alength > 0 ? *(const char *)a : '-';
		out[1] = blength > 0 ? *(const char *)b : '-';
		out[2] = 0;
	}
	return out;
}

static long long value(const void *p, int n)
{
	char buf[64];
	if (n > 63)
		n = 63;
	memcpy(buf, p, n);
	buf[n] = 0;
	return atoll(buf);
}

void *wavefront_function(const void *x, int xlength, const void *y, int ylength, const void *d, int dlength)
{
	long long sum = value(x, xlength) + value(y, ylength) + value(d, dlength);
	const char *at = getenv("CRASH_SUM");
	if (at != NULL && sum == atoll(at))
		crash();
	char *out = malloc(32);
	if (out)
		snprintf(out, 32, "%lld", sum);
	return out;
}
