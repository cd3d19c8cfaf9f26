/* An All-Pairs function for rightsize's shared-library interface: the number
 * of differing bytes, as the built-in bytediff computes it. */
#include <stdio.h>
#include <stdlib.h>

void *allpairs_function(const void *a, int alength, const void *b, int blength)
{
	const unsigned char *x = a, *y = b;
	int n = alength < blength ? alength : blength;
	long diff = (alength > blength ? alength : blength) - n;
	for (int i = 0; i < n; i++)
		diff += x[i] != y[i];
	char *out = malloc(32);
	if (out)
		snprintf(out, 32, "%ld", diff);
	return out;
}
