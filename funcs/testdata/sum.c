/* A Wavefront function for rightsize's shared-library interface: the sum of
 * the three neighbouring cells, each a decimal integer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	char *out = malloc(32);
	if (out)
		snprintf(out, 32, "%lld", value(x, xlength) + value(y, ylength) + value(d, dlength));
	return out;
}
