#!/bin/sh
# search.sh DB QUERY: for every sequence in the FASTA file QUERY, finds the
# sequence of the FASTA file DB sharing the most 8-letter words with it, and
# prints "query subject shared-words". A toy stand-in for blastn.
set -eu
awk -v k=8 '
  function read(file, names, seqs,    n, line) {
    n = 0
    while ((getline line < file) > 0) {
      if (line ~ /^>/) { n++; names[n] = substr(line, 2); seqs[n] = "" }
      else seqs[n] = seqs[n] line
    }
    close(file)
    return n
  }
  BEGIN {
    nd = read(ARGV[1], dname, dseq)
    for (d = 1; d <= nd; d++)
      for (i = 1; i + k - 1 <= length(dseq[d]); i++) {
        w = substr(dseq[d], i, k)
        if (!((w, d) in seen)) { seen[w, d] = 1; index_[w] = index_[w] " " d }
      }
    nq = read(ARGV[2], qname, qseq)
    for (q = 1; q <= nq; q++) {
      delete score; delete used
      for (i = 1; i + k - 1 <= length(qseq[q]); i++) {
        w = substr(qseq[q], i, k)
        if (w in used || !(w in index_)) continue
        used[w] = 1
        m = split(index_[w], ds, " ")
        for (j = 1; j <= m; j++) score[ds[j]]++
      }
      best = "-"; top = 0
      for (d in score) if (score[d] > top || (score[d] == top && dname[d] < best)) { top = score[d]; best = dname[d] }
      printf "%s\t%s\t%d\n", qname[q], best, top
    }
    exit
  }' "$1" "$2"
