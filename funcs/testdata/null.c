/* A broken All-Pairs function: it returns NULL, which the engine must report. */
#include <stddef.h>

void *allpairs_function(const void *a, int alength, const void *b, int blength)
{
	return NULL;
}
