/* A function that does nothing: the per-cell overhead benchmark's program. */
int main(void) { return 0; }
