// Command goliftbridge times go-liftbridge (the Liftbridge project's Go client) as a
// benchmark peer for bench/liftbridge.py, through the client's public API only.
//
//	goliftbridge publish <host:port> <stream> <count> <size> <window>
//	goliftbridge consume <host:port> <stream> <count>
//
// publish: PublishAsync to partition 0 with LEADER acks, at most <window> messages awaiting
// their ack; done when every ack has arrived. consume: Subscribe to partition 0 from the
// earliest offset; done when <count> messages have arrived. The clock runs from the first
// call to the last ack or message (connecting and metadata are outside it). One JSON line
// on stdout: messages, bytes, seconds, rate, and this process's CPU seconds over the same
// span (user + system, all threads).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	lift "github.com/liftbridge-io/go-liftbridge/v2"
)

const runTimeout = 300 * time.Second

type result struct {
	Messages int64   `json:"messages"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"rate"`
	CPU      float64 `json:"cpu_seconds"`
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(usage.Utime) + tv(usage.Stime)
}

type clock struct {
	wall time.Time
	cpu  float64
}

func start() clock { return clock{time.Now(), cpuSeconds()} }

func (c clock) result(messages, bytes int64) result {
	seconds := time.Since(c.wall).Seconds()
	return result{messages, bytes, seconds, float64(messages) / seconds, cpuSeconds() - c.cpu}
}

func connect(ctx context.Context, addr string) (lift.Client, error) {
	opts := lift.DefaultClientOptions()
	opts.Brokers = []string{addr}
	opts.AckWaitTime = runTimeout
	return opts.ConnectCtx(ctx)
}

func publish(ctx context.Context, addr, stream string, count, size, window int) (result, error) {
	client, err := connect(ctx, addr)
	if err != nil {
		return result{}, fmt.Errorf("connect: %w", err)
	}
	defer client.Close()
	// the partition's leader and its gRPC connection are looked up before the clock starts
	if _, err := client.FetchPartitionMetadata(ctx, stream, 0); err != nil {
		return result{}, fmt.Errorf("partition metadata: %w", err)
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = 'x'
	}
	slots := make(chan struct{}, window)
	var (
		acked    atomic.Int64
		failOnce sync.Once
		failure  error
		pending  sync.WaitGroup
	)
	onAck := func(ack *lift.Ack, err error) {
		if err != nil {
			failOnce.Do(func() { failure = err })
		} else if ack != nil {
			acked.Add(1)
		}
		<-slots
		pending.Done()
	}
	clk := start()
	for i := 0; i < count; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return result{}, ctx.Err()
		}
		pending.Add(1)
		err := client.PublishAsync(ctx, stream, body, onAck,
			lift.ToPartition(0), lift.AckPolicyLeader())
		if err != nil {
			return result{}, fmt.Errorf("publish %d: %w", i, err)
		}
	}
	pending.Wait()
	res := clk.result(acked.Load(), acked.Load()*int64(size))
	if failure != nil {
		return res, fmt.Errorf("ack: %w", failure)
	}
	if acked.Load() != int64(count) {
		return res, fmt.Errorf("%d of %d acked", acked.Load(), count)
	}
	return res, nil
}

func consume(ctx context.Context, addr, stream string, count int) (result, error) {
	client, err := connect(ctx, addr)
	if err != nil {
		return result{}, fmt.Errorf("connect: %w", err)
	}
	defer client.Close()
	if _, err := client.FetchPartitionMetadata(ctx, stream, 0); err != nil {
		return result{}, fmt.Errorf("partition metadata: %w", err)
	}
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		seen, bytes int64
		next        int64
		done        = make(chan error, 1)
	)
	handler := func(msg *lift.Message, err error) {
		if err != nil {
			select {
			case done <- err:
			default:
			}
			return
		}
		if seen >= int64(count) {
			return
		}
		if msg.Offset() != next {
			select {
			case done <- fmt.Errorf("offset %d, expected %d", msg.Offset(), next):
			default:
			}
			return
		}
		next++
		bytes += int64(len(msg.Value()))
		seen++
		if seen == int64(count) {
			done <- nil
		}
	}
	clk := start()
	err = client.Subscribe(subCtx, stream, handler,
		lift.Partition(0), lift.StartAtEarliestReceived())
	if err != nil {
		return result{}, fmt.Errorf("subscribe: %w", err)
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	res := clk.result(seen, bytes)
	cancel()
	return res, err
}

func atoi(text, what string) int {
	n, err := strconv.Atoi(text)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "%s: a positive integer, got %q\n", what, text)
		os.Exit(2)
	}
	return n
}

func main() {
	args := os.Args[1:]
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var (
		res result
		err error
	)
	switch {
	case len(args) == 6 && args[0] == "publish":
		res, err = publish(ctx, args[1], args[2], atoi(args[3], "count"),
			atoi(args[4], "size"), atoi(args[5], "window"))
	case len(args) == 4 && args[0] == "consume":
		res, err = consume(ctx, args[1], args[2], atoi(args[3], "count"))
	default:
		err = errors.New("usage: goliftbridge publish ADDR STREAM COUNT SIZE WINDOW | " +
			"consume ADDR STREAM COUNT")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
