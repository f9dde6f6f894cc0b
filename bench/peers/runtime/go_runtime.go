// go_runtime.go — the runtime benchmark's two workloads written with goroutines and channels, as
// a peer for bench/runtime/bench_runtime.c. Same command line and output format.
//
//	spawn-tree --depth D : each goroutine starts two child goroutines and waits for their
//	                       completion messages (subtree sizes) on a channel; leaves send 1.
//	ping-pong --pairs P --msgs M : P pairs of goroutines, one unbuffered channel each way,
//	                       M messages each way.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func peakRSSMB() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024.0
}

func node(depth int, parent chan<- int64) {
	if depth == 0 {
		parent <- 1
		return
	}
	ch := make(chan int64, 2)
	go node(depth-1, ch)
	go node(depth-1, ch)
	a := <-ch
	b := <-ch
	parent <- a + b + 1
}

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	what := os.Args[1]
	fs := flag.NewFlagSet(what, flag.ExitOnError)
	depth := fs.Int("depth", 20, "tree depth")
	pairs := fs.Int("pairs", 1000, "pairs")
	msgs := fs.Int("msgs", 10000, "messages each way")
	fs.Parse(os.Args[2:])
	workers := runtime.GOMAXPROCS(0)
	t0 := time.Now()
	switch what {
	case "spawn-tree":
		expect := int64(1)<<(*depth+1) - 1
		root := make(chan int64, 1)
		go node(*depth, root)
		got := <-root
		dt := time.Since(t0).Seconds()
		if got != expect {
			fmt.Fprintf(os.Stderr, "go spawn-tree: %d != %d\n", got, expect)
			os.Exit(1)
		}
		fmt.Printf("go spawn-tree depth=%d workers=%d tasks=%d time=%.4fs rate=%.3fM tasks/s peak_rss=%.1fMB\n",
			*depth, workers, expect, dt, float64(expect)/dt/1e6, peakRSSMB())
	case "ping-pong":
		var wg sync.WaitGroup
		counts := make([]int, *pairs)
		for p := 0; p < *pairs; p++ {
			ab := make(chan int)
			ba := make(chan int)
			wg.Add(2)
			go func(p int) { // pinger
				defer wg.Done()
				for i := 1; i <= *msgs; i++ {
					ab <- i
					if <-ba == i {
						counts[p]++
					}
				}
			}(p)
			go func() { // ponger
				defer wg.Done()
				for i := 0; i < *msgs; i++ {
					ba <- <-ab
				}
			}()
		}
		wg.Wait()
		dt := time.Since(t0).Seconds()
		for p := range counts {
			if counts[p] != *msgs {
				fmt.Fprintf(os.Stderr, "go ping-pong: pair %d got %d replies\n", p, counts[p])
				os.Exit(1)
			}
		}
		total := 2 * int64(*pairs) * int64(*msgs)
		fmt.Printf("go ping-pong pairs=%d msgs=%d workers=%d messages=%d time=%.4fs rate=%.3fM msgs/s peak_rss=%.1fMB\n",
			*pairs, *msgs, workers, total, dt, float64(total)/dt/1e6, peakRSSMB())
	default:
		os.Exit(2)
	}
}
