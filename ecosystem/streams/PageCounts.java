import java.io.FileReader;
import java.io.Reader;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * Page views counted per page and hour, then joined with each page's section.
 *
 * <p>"APP-views" holds view id -> page, with duplicates a retrying producer left (the same view
 * id sent again): a persistent store of seen view ids drops them, so each view counts once. The
 * views are regrouped by page (a repartition), counted per hour in a persistent window store
 * (its changelog compacted), re-keyed by page and joined with the "APP-sections" table (a second
 * repartition): "section:windowStart:count" per page on "APP-counts", where APP is the
 * application.id. exactly_once_v2 and a standby replica come from the settings, as a production
 * application sets them.
 *
 * <p>Argument: a properties file of StreamsConfig settings, as Kafka's own tools take one.
 */
public class PageCounts {
    static final String SEEN = "seen-views";

    /** Forwards a view the first time its id comes, drops it after. */
    static class FirstSighting implements FixedKeyProcessor<String, String, String> {
        private FixedKeyProcessorContext<String, String> context;
        private KeyValueStore<String, String> seen;

        @Override
        public void init(FixedKeyProcessorContext<String, String> context) {
            this.context = context;
            this.seen = context.getStateStore(SEEN);
        }

        @Override
        public void process(FixedKeyRecord<String, String> view) {
            if (seen.putIfAbsent(view.key(), view.value()) == null) {
                context.forward(view);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Properties settings = new Properties();
        try (Reader file = new FileReader(args[0])) {
            settings.load(file);
        }
        String app = settings.getProperty(StreamsConfig.APPLICATION_ID_CONFIG);
        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
            Stores.persistentKeyValueStore(SEEN), Serdes.String(), Serdes.String()));
        KTable<String, String> sections = builder.table(app + "-sections", Consumed.with(Serdes.String(), Serdes.String()));
        builder.stream(app + "-views", Consumed.with(Serdes.String(), Serdes.String()))
            .processValues(FirstSighting::new, SEEN)
            .groupBy((view, page) -> page, Grouped.with("by-page", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofHours(1)))
            .count(Materialized.as("page-counts"))
            .toStream()
            .map((window, count) -> KeyValue.pair(window.key(), window.window().start() + ":" + count))
            .join(sections, (counted, section) -> section + ":" + counted)
            .to(app + "-counts", Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), settings);
        CountDownLatch ended = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                ended.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(30))));
        streams.start();
        ended.await();
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
