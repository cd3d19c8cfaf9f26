package makeflowcmd

const longHelp = `makeflow runs a workflow: a set of rules, each a shell command that reads
some files and writes others, in the Makeflow language of CCTools. Rules run
as soon as the files they read exist, as many at once as allowed (-j).
Without WORKFLOW it reads ./Makeflow.

THE LANGUAGE
  # a comment
  REF=genome.fa                 a variable; $REF, $(REF) or ${REF} uses it
  PARTS=part.1 part.2           a list: $(PARTS) in a rule line is two files
  PARTS+=part.3                 += appends, with a space
  export REF                    pass REF to the commands' environment
  export THREADS=4              (only exported variables reach commands)
  .MAKEFLOW CATEGORY search     later rules belong to the category "search"
  .MAKEFLOW CORES 2             resources for that category's rules
  .MAKEFLOW MEMORY 4G           (MB by default; also DISK, GPUS, WALL_TIME)
  .MAKEFLOW WALL_TIME 3600      seconds; a rule running longer is stopped and fails
  .SIZE genome.fa 3G            expected size of a file

  out.txt err.txt: in.txt $(REF)        a rule: targets, then sources
  THREADS=8                             a variable for this rule only
  	search -t $$THREADS in.txt > out.txt 2> err.txt
                                        one command line, indented by a tab

  - Variables are replaced when the file is read. A $ that the shell should
    see is written $$ or \$. Undefined variables are errors (environment
    variables count as defined). Inside single quotes $ is left alone, as in
    awk '{ print $2 }'.
  - A backslash makes the next character literal, also inside quotes, and
    is removed (write \\ for a backslash); at the end of a line it joins the
    next one. An unquoted # starts a comment, also in commands.
  - File names may be quoted ("a b.txt"); runs of dashes are fine (a--b).
  - "local->remote" names a file differently where the command runs: the
    command sees only the rule's files, in a sandbox, under their remote
    names.
  - "LOCAL cmd" always runs on this machine; "MAKEFLOW sub.mf [dir]" runs a
    nested workflow as one rule.
  - Every file a command reads must be a source of its rule and every file it
    writes a target; makeflow checks that the targets exist afterwards.

JSON AND JX
  A *.json file (or --json) is CCTools' JSON form: {"rules": [{"command":
  ..., "inputs": [...], "outputs": [...]}, ...]}, with "environment",
  "categories" and "default_category"; an error names the rule by its
  index in "rules" and the value at fault, at its file:line:column
  (w.json:5:6: rule 2: "command" must be a string, not a number). A
  *.jx file (or --jx) is the same written in JX, JSON with expressions,
  evaluated first:
      {"define": {"N": 10},
       "rules": [{"command": format("sim %d > out.%d", i, i),
                  "outputs": ["out." + i]} for i in range(N)]}
  JX has symbols (the names "define", --jx-args FILE and --jx-define
  VAR=EXPR bind; the flags win, and among them the later one, as given),
  + - * / % (+ joins strings and lists),
  == != < <= > >=, and or not, lookups a[i] a["key"] and slices a[1:3],
  comprehensions [EXPR for x in LIST if COND], error(MSG), and range,
  format, join, len, ceil, floor, basename, dirname, listdir, escape,
  template, keys, values, items, fetch, select, project, schema and like.
  A rule {"workflow": "sub.jx", "args": {"n": 1}} runs a JX sub-workflow
  with those variables. Errors are reported at their file:line:column.
  Unlike CCTools 9.9, and as its manual says, operators associate to the
  left (10-2-3 is 5), "and" binds tighter than "or", and like(STRING,
  REGEX) takes the string first. Not supported: the a.f() method syntax,
  dictionary comprehensions and X if C else Y of later CCTools releases.
  --argv FILE reads options from a JSON object of long option names
  ({"jx-define": "N=3", "json": null, "MAKEFLOW": "wf.json"}), as CCTools
  does.

BEFORE ANYTHING RUNS
  makeflow checks the file and reports every problem as file:line:column:
  syntax errors, unknown directives, bad resource values, dependency cycles,
  files made by two rules, and inputs that neither exist nor are made by a
  rule. --check does only this, for the nested workflows that exist too
  (each is also checked when its rule runs it).

THE LOG, RECOVERY AND FAILURES
  Every step is appended to WORKFLOW.makeflowlog (CCTools' format). Run the
  same command again after a crash, an interrupt or a failure and only what
  is not done runs: a rule runs again if its outputs were deleted, if an
  input changed since it ran, or if a rule it depends on runs again.

  Each rule runs in a process group of its own: whatever it leaves running
  in the background is killed when it ends. If makeflow dies, even by
  kill -9, a keeper process kills every rule still running (or starting:
  rules have its mark, RIGHTSIZE_KEEPER, in their environment) and keeps
  the log locked until they are gone; a re-run waits for that (up to 30 s)
  rather than start a rule while its previous run goes on. A process that
  leaves its group (setsid) is not followed.

  When a rule fails, everything that does not need its outputs still runs;
  then makeflow exits with status 1 and lists the failed rules with their
  exit status and the end of their standard error. Partial outputs of a
  failed rule are moved to makeflow.failed.<rule>. Failed rules are retried
  only with -r N (or -R).

  Before a rule runs, nothing may be left where it writes: outputs that the
  log says an earlier run made (or was making) are deleted; any other file
  in the way (the log was lost or cut short, or the file was there before)
  is moved into makeflow.stale.<rule>/ (then .<rule>.1, ...), never lost.

  Only one makeflow at a time runs a workflow: a run locks its log, and
  another run or a clean of the same workflow refuses, naming the process
  that holds the lock, and changes nothing.

  -c (--clean=all) removes everything the rules made, the makeflow.failed
  and makeflow.stale directories, and the log. --clean=outputs removes only
  the workflow's outputs: the files in MAKEFLOW_OUTPUTS if the workflow sets
  it, otherwise (as in CCTools) the files rules make that no rule reads.
  --clean=intermediates removes the other files rules make, and keeps the
  outputs and the log. No clean removes a file that no rule makes (an input),
  one named in MAKEFLOW_INPUTS, or a directory holding one.

WHERE IT RUNS
  Without -T (or MAKEFLOW_BATCH_QUEUE_TYPE) or --local, makeflow decides. It
  predicts each rule's time from its earlier runs (the last completed run of
  a rule with the same category and command, kept across -c in
  ~/.cache/rightsize/makeflow-rules.costs; else its category's mean, else the
  workflow's, else 1 s), looks for the cluster you have (RIGHTSIZE_CLUSTER,
  ~/.config/rightsize/cluster, or a SLURM, Grid Engine or HTCondor that
  answers), and predicts the makespan here (rules holding the cores they ask
  for) and there: rules shorter than their dispatch stay here, and this
  machine's cores may take rules too (hybrid; on Work Queue as a worker of
  the master, which takes no more once a worker connects from this
  machine). A local "cluster" (RIGHTSIZE_CLUSTER="local hosts=16 delay=1")
  runs the rules sent to it, or all of them with -T local, on this machine's
  local batch driver, that wide and that slow to start them, for trying
  placement out. It runs where it predicts fastest, staying here unless the
  cluster is predicted more than 5% and half a second faster (hybrid: only
  5% when the cluster's width and dispatch are measured or given, not
  assumed, since this machine's cores work from the start), and says so in
  a line when the workflow leaves this machine.
  --explain prints the inputs and where each came from, the critical path, the
  total work, each prediction and the choice, and after the run the
  prediction against the time taken. Ready rules start in order of the
  longest predicted time after them. With -T, --auto-local keeps the short
  rules here too, and --hybrid makes this machine's cores take rules from the
  start. RIGHTSIZE_CLUSTER=none stays here.

ON A CLUSTER
  -T wq runs every rule that is not LOCAL on Work Queue workers: makeflow
  listens for them (port 9123, -p, or any free port written to -Z FILE;
  -N NAME advertises it to the catalog) and prints "listening for workers on
  port N.". Start workers anywhere that can reach this machine:
      workqueue worker HOST N        (or CCTools' work_queue_worker HOST N)
  Each rule runs in a sandbox of its own on a worker: its inputs are sent
  there under their remote names and its outputs fetched back, so every file
  a rule uses must be declared. An input that several rules read is cached
  on the workers, sent once to each. A file given by an absolute path (or
  one outside the workflow's directory) cannot be sent: rename it
  (/data/ref.fa->ref.fa) and use the remote name in the command, or name a
  directory that every worker sees under the same path with --shared-fs DIR;
  makeflow refuses such a workflow before it starts, with the file's
  position. Workers need --password FILE when makeflow is given one;
  workers it refuses are reported on standard error. With --ssl-cert CERT
  --ssl-key KEY workers connect over TLS: give them --ssl, or --ssl-ca CERT
  so that they check they reached this makeflow (README: Security).

  -T slurm, -T sge and -T condor submit one batch job per rule; the jobs run
  in the workflow's directory, which must be on a filesystem the cluster's
  nodes share. -B passes extra options to sbatch or qsub (for condor: one
  more line of the submit file).

  CATEGORY, CORES, MEMORY (MB), DISK (MB) and WALL_TIME (s) are asked of the
  batch system (Work Queue, sbatch --cpus-per-task/--mem/--tmp/--time, qsub
  -pe smp/-l h_vmem/-l h_rt, request_cpus/memory/disk). -J bounds the rules
  submitted at once (default 1000 for wq, 100 otherwise); LOCAL rules and
  nested workflows run on this machine, within -j. The log, recovery,
  failures and -c work as for local runs. What remote commands print on
  standard output is not brought back; a failed rule's report shows the end
  of its standard error (on Work Queue, of its output).

WATCHING A RUN
  --http :PORT serves a live page on this machine (HOST:PORT where it says):
  progress, rate and time left, where the rules run and the prediction, the
  workers, and each failed rule with the end of its standard error. It
  refreshes itself; /status has the same as JSON, /metrics for Prometheus.

UNLIKE CCTOOLS
  On purpose, where CCTools 9.9 does what its manual does not: a failed
  rule makes the run exit 1, and is retried only when -r or -R asks (CCTools
  retries it silently and exits 0); a dependency cycle is an error (CCTools
  ignores it); every error in the file is reported at once, with its column;
  -T local honours local->remote renaming; one makeflow at a time runs a
  workflow. --storage-type 2 runs a workflow to its end where CCTools stops
  it. CCTools' makeflow_viz, makeflow_linker and starch are not provided;
  makeflow_analyze is, without -b.

EXIT STATUS
  0 everything ran; 1 a rule failed or the workflow has errors; 2 bad flags;
  130 interrupted, 141 the reader of its output went away (finished rules
  are kept, jobs removed).

EXAMPLES
  makeflow                       run ./Makeflow with one job per CPU
  makeflow -j 8 blast.mf         at most 8 rules at once
  makeflow --check blast.mf      only look for errors
  makeflow -T dryrun blast.mf    print the commands that would run
  makeflow -T wq blast.mf        run on Work Queue workers (port 9123)
  makeflow -T slurm -J 50 blast.mf  run on SLURM, at most 50 jobs at once
  makeflow --http :8080 blast.mf  watch it at http://127.0.0.1:8080/
  makeflow --dot blast.mf | dot -Tsvg > blast.svg
  makeflow -c blast.mf           remove what the workflow made
  makeflow --clean=intermediates blast.mf   keep only the final results`
