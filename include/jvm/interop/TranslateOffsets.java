/*
 * MirrorMaker 2's own offset translation, as a command: runs
 * org.apache.kafka.connect.mirror.RemoteClusterUtils.translateOffsets against one cluster
 * and prints what it returns, one JSON line per partition:
 *
 *   {"topic":"primary.orders","partition":0,"offset":3400}
 *
 * It exists so that tests can prove that tools built on MM2's client library read the
 * checkpoints our replicator writes, and can record what MM2's own checkpoints say. Run it
 * with Java 17's source launcher, no compile step:
 *
 *   java -cp '.cache/jvm/kafka/*' include/jvm/interop/TranslateOffsets.java \
 *       --bootstrap HOST:PORT --source-alias ALIAS --group GROUP [--timeout-ms MS]
 *
 * stdout carries only the JSON lines; everything else (Kafka's logging included) goes to
 * stderr. Exit codes: 0 translated (possibly nothing, if the group has no checkpoints),
 * 1 failed (the message on stderr says why), 2 bad arguments.
 */

import java.io.PrintStream;
import java.time.Duration;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {

    private static final String USAGE =
        "usage: TranslateOffsets --bootstrap HOST:PORT --source-alias ALIAS --group GROUP"
            + " [--timeout-ms MS (default 30000)]";

    /** Wrong or missing arguments: exit 2 with the usage line. */
    static final class UsageException extends Exception {
        UsageException(String message) {
            super(message);
        }
    }

    /** A failure whose message already says what is wrong and how to fix it: exit 1. */
    static final class ToolException extends Exception {
        ToolException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    record Arguments(String bootstrap, String sourceAlias, String group, Duration timeout) {

        static Arguments parse(String[] argv) throws UsageException {
            Map<String, String> values = new HashMap<>();
            for (int i = 0; i < argv.length; i += 2) {
                String name = argv[i];
                if (!Set.of("--bootstrap", "--source-alias", "--group", "--timeout-ms").contains(name)) {
                    throw new UsageException("unknown argument " + name);
                }
                if (i + 1 >= argv.length) {
                    throw new UsageException(name + " needs a value");
                }
                values.put(name, argv[i + 1]);
            }
            for (String required : new String[] {"--bootstrap", "--source-alias", "--group"}) {
                if (values.getOrDefault(required, "").isEmpty()) {
                    throw new UsageException("missing " + required);
                }
            }
            long timeoutMs;
            try {
                timeoutMs = Long.parseLong(values.getOrDefault("--timeout-ms", "30000"));
            } catch (NumberFormatException e) {
                throw new UsageException("--timeout-ms must be a whole number of milliseconds");
            }
            if (timeoutMs <= 0) {
                throw new UsageException("--timeout-ms must be positive");
            }
            return new Arguments(values.get("--bootstrap"), values.get("--source-alias"),
                values.get("--group"), Duration.ofMillis(timeoutMs));
        }

        Map<String, Object> clientProperties() {
            Map<String, Object> properties = new HashMap<>();
            properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            return properties;
        }
    }

    public static void main(String[] argv) {
        // Whatever a library prints to System.out (log4j's default console appender
        // included) must not mix with the JSON lines that callers parse.
        PrintStream json = System.out;
        System.setOut(System.err);
        try {
            Arguments arguments = Arguments.parse(argv);
            print(json, translate(arguments));
        } catch (UsageException e) {
            System.err.println("TranslateOffsets: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
        } catch (ToolException e) {
            System.err.println("TranslateOffsets: " + e.getMessage());
            System.exit(1);
        } catch (Exception e) {
            System.err.println("TranslateOffsets: RemoteClusterUtils.translateOffsets failed: " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }

    static Map<TopicPartition, OffsetAndMetadata> translate(Arguments arguments) throws Exception {
        Map<String, Object> properties = arguments.clientProperties();
        try (MirrorClient client = new MirrorClient(properties)) {
            requireTopic(arguments, client.replicationPolicy().checkpointsTopic(arguments.sourceAlias()));
        }
        return RemoteClusterUtils.translateOffsets(
            properties, arguments.sourceAlias(), arguments.group(), arguments.timeout());
    }

    /**
     * translateOffsets waits on a missing topic or an unreachable cluster until Kafka's
     * default API timeout (60 s) and then names neither; check both first, within the
     * caller's timeout, and say which it is.
     */
    static void requireTopic(Arguments arguments, String topic) throws ToolException {
        Map<String, Object> properties = arguments.clientProperties();
        int timeoutMs = (int) Math.min(Integer.MAX_VALUE, arguments.timeout().toMillis());
        properties.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        properties.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        Set<String> topics;
        try (Admin admin = Admin.create(properties)) {
            topics = admin.listTopics().names().get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException | ExecutionException e) {
            throw new ToolException("cannot list topics of the cluster at " + arguments.bootstrap()
                + " within " + timeoutMs + " ms (" + e + "); check --bootstrap and that the"
                + " cluster runs", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ToolException("interrupted while listing topics", e);
        }
        if (!topics.contains(topic)) {
            throw new ToolException("no topic " + topic + " on " + arguments.bootstrap()
                + ": nothing has written checkpoints for source cluster alias '"
                + arguments.sourceAlias() + "' to this cluster; check --source-alias and that"
                + " checkpoints are emitted to this cluster", null);
        }
    }

    /** Kafka topic names are limited to [a-zA-Z0-9._-], so they need no JSON escaping. */
    static void print(PrintStream out, Map<TopicPartition, OffsetAndMetadata> offsets) {
        offsets.entrySet().stream()
            .sorted(Map.Entry.comparingByKey(
                Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition)))
            .forEach(entry -> out.printf("{\"topic\":\"%s\",\"partition\":%d,\"offset\":%d}%n",
                entry.getKey().topic(), entry.getKey().partition(), entry.getValue().offset()));
        out.flush();
    }
}
