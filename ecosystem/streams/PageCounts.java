import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
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

/**
 * Page views (user -> page on "views") counted per page and hour in a persistent store, then
 * joined with each page's section (the "sections" table): "section:windowStart:count" per page
 * on "counts". Regrouping by page and re-keying after the count make two repartition topics;
 * exactly_once_v2 and a standby replica, as a production application would run.
 * Arguments: bootstrap, application id, state directory, group protocol.
 */
public class PageCounts {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[3]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // A member killed with kill -9 leaves the group after this, not Kafka's default 45 s.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> sections = builder.table("sections", Consumed.with(Serdes.String(), Serdes.String()));
        builder.stream("views", Consumed.with(Serdes.String(), Serdes.String()))
            .groupBy((user, page) -> page, Grouped.with("by-page", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofHours(1)))
            .count(Materialized.as("page-counts"))
            .toStream()
            .map((window, count) -> KeyValue.pair(window.key(), window.window().start() + ":" + count))
            .join(sections, (counted, section) -> section + ":" + counted)
            .to("counts", Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
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
