package workqueuecmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/model/sim"
)

func newSimCmd(s cmdutil.Streams) *cobra.Command {
	var timeline string
	var seed int64 = -1
	cmd := &cobra.Command{
		Use:   "sim [flags] SCENARIO.json",
		Short: "simulate a Work Queue run: the real scheduler and factory on simulated workers, network and batch system",
		Long: `Simulates a run described by a JSON scenario file (its keys are in the
README's Simulator section; model/sim/testdata has examples): the master's
scheduler — and, as the scenario asks, the worker factory's plan, the
distributed master's job tracker and the Wavefront block scheduler — decide
as in a real run, on a logical clock, while workers, network, batch system
and tasks are simulated. Prints the makespan, utilisation, worker time and
data moved; --timeline draws workers and tasks over time as a PNG. Exits 1
if the run could not finish.`,
		Args: cmdutil.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := sim.Load(args[0])
			if err != nil {
				return err
			}
			if seed >= 0 {
				sc.Seed = uint64(seed)
			}
			start := time.Now()
			r, err := sim.Run(cmd.Context(), sc)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			fmt.Fprint(s.Out, r)
			fmt.Fprintf(s.Out, "%-18s %.2f s\n", "simulated in", time.Since(start).Seconds())
			if timeline != "" {
				out, err := cmdutil.CreateOutput(timeline)
				if err != nil {
					return err
				}
				defer out.Abort()
				if err := r.WriteTimeline(out); err != nil {
					return err
				}
				if err := out.Commit(); err != nil {
					return err
				}
			}
			if r.Unfinished {
				return &cmdutil.ExitError{Code: cmdutil.ExitFailure,
					Err: fmt.Errorf("%s: %d of %d tasks did not finish by %.0f s", args[0], r.Tasks-r.Finished-r.Failed, r.Tasks, r.Makespan)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&timeline, "timeline", "", "draw workers and tasks over time into this PNG file")
	cmd.Flags().Int64Var(&seed, "seed", -1, "the random seed (default: the scenario's)")
	return cmd
}
