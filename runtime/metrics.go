package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the runtime's Prometheus collectors, labelled by route.
type metrics struct {
	in, out, dedup, filtered, dlq, errors *prometheus.CounterVec
	unmatched, added                      *prometheus.CounterVec
	lag, committed                        *prometheus.GaugeVec
}

// routeMetrics are one route's children of the collectors.
type routeMetrics struct {
	in, out, dedup, filtered, dlq, errors prometheus.Counter
	unmatched                             prometheus.Counter // a switch without default dropped them (part of out)
	added                                 prometheus.Counter // unnest made them, beyond each array's first
	lag                                   prometheus.Gauge
	committed                             prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mqb", Name: name, Help: help}, []string{"route"})
	}
	m := &metrics{
		in:       counter("records_in_total", "Records read from the route's source."),
		out:      counter("records_out_total", "Records written to the route's sink."),
		dedup:    counter("records_deduplicated_total", "Records dropped as duplicates (dedup step or covered part file)."),
		filtered: counter("records_filtered_total", "Records dropped by a filter."),
		dlq:      counter("records_dead_lettered_total", "Records written to the dead-letter queue."),
		errors:   counter("record_errors_total", "Records that failed with no dead-letter queue to take them."),
		unmatched: counter("records_unmatched_total",
			"Records a switch without default dropped for matching no case (acked, and counted in records_out_total)."),
		added: counter("records_added_total",
			"Records an unnest step made beyond the first element of each array (in + added = out + deduplicated + filtered + dead-lettered + errors)."),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "mqb", Name: "commit_lag_records",
			Help: "Records read but not yet covered by the committed checkpoint."}, []string{"route"}),
		committed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "mqb", Name: "committed_records",
			Help: "Records the committed position covers, from the source's start (for a partitioned source, its partitions' next offsets added up), earlier runs included."}, []string{"route"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	for _, c := range []**prometheus.CounterVec{&m.in, &m.out, &m.dedup, &m.filtered, &m.dlq, &m.errors, &m.unmatched, &m.added} {
		if *c, err = register(reg, *c); err != nil {
			return nil, err
		}
	}
	for _, g := range []**prometheus.GaugeVec{&m.lag, &m.committed} {
		if *g, err = register(reg, *g); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// register registers c, or returns the collector an earlier Run on the same
// registerer left there.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) forRoute(name string) *routeMetrics {
	return &routeMetrics{
		in: m.in.WithLabelValues(name), out: m.out.WithLabelValues(name),
		dedup: m.dedup.WithLabelValues(name), filtered: m.filtered.WithLabelValues(name),
		dlq: m.dlq.WithLabelValues(name), errors: m.errors.WithLabelValues(name),
		unmatched: m.unmatched.WithLabelValues(name),
		added:     m.added.WithLabelValues(name),
		lag:       m.lag.WithLabelValues(name),
		committed: m.committed.WithLabelValues(name),
	}
}

func (m *routeMetrics) add(out, filtered, dups, dlq, errs int64) {
	m.out.Add(float64(out))
	m.filtered.Add(float64(filtered))
	m.dedup.Add(float64(dups))
	m.dlq.Add(float64(dlq))
	m.errors.Add(float64(errs))
}

// ServeMetrics serves gatherer's metrics at http://addr/metrics until ctx is
// cancelled (for `mqbc run --metrics-addr`), health's /healthz and
// /readyz when health is not nil, and tap's /tap when tap is not nil. It
// returns once listening, with the bound address (useful with port 0).
func ServeMetrics(ctx context.Context, addr string, gatherer prometheus.Gatherer, health *Health, tap *Tap) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	if health != nil {
		health.handle(mux)
	}
	if tap != nil {
		tap.handle(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	return ln.Addr(), nil
}
