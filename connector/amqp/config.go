package amqp

import (
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// sourceConfig is an amqp source's attributes (stdlib declares them and
// their defaults).
type sourceConfig struct {
	URL            []plan.Part `attr:"url"` // rendered by RenderStatic (env() allowed)
	Queue          string      `attr:"queue"`
	Prefetch       int64       `attr:"prefetch"`
	ProducerIDs    bool        `attr:"producer_ids"`
	Format         string      `attr:"format"`
	SourceMetadata bool        `attr:"source_metadata"`
}

// sinkConfig is an amqp sink's attributes.
type sinkConfig struct {
	URL        []plan.Part `attr:"url"`
	Exchange   string      `attr:"exchange"`
	RoutingKey []plan.Part `attr:"routing_key"`
}

func init() {
	runtime.RegisterSource("amqp", buildSource, runtime.ChecksPremises(plan.PremiseQueueKeepsMessages))
	runtime.RegisterSink("amqp", func(b *runtime.BuildEnv, cfg *sinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.routingKey.Programs(), nil
	})
}
