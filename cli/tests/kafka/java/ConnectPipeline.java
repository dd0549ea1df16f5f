// A Kafka Connect worker in distributed mode (Apache Kafka's connect-runtime 4.3, its
// herder, worker and Kafka-backed config, offset and status stores, unchanged) against
// `shale serve --kafka`: a file source connector copies a file's lines into a topic and a
// file sink connector copies the topic into another file. Every step asserted.
//
//   first:  the worker creates its compacted internal topics and joins its group; the
//           connectors are created; every line arrives, in order, once.
//   again:  (run after more lines are appended and the server restarted) a new worker
//           finds the connectors in its config topic and their places in its offset
//           topic and consumer group: the new lines arrive after the old, none twice.
//
// Connect's REST resources are not served (the Jetty server only listens, for the URL a
// worker advertises to its group): their Jetty security module is not among the jars
// `scripts/java-kafka.sh` can fetch, so the connectors are created through the herder,
// the object the REST resources call.
//
// With `exactly-once`, the worker runs with exactly.once.source.support=enabled: its
// config topic is written by a transactional producer, each source task's records and
// offsets go in transactions of its own transactional id, and the leader fences the ids
// of the tasks it starts.
//
//   java -cp '.java-kafka/libs/*' cli/tests/kafka/java/ConnectPipeline.java \
//       HOST:PORT DIR first|again at-least-once|exactly-once

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;
import org.apache.kafka.connect.runtime.isolation.LoaderSwap;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.rest.ConnectRestServer;
import org.apache.kafka.connect.runtime.rest.RestClient;
import org.apache.kafka.connect.util.FutureCallback;

public class ConnectPipeline {
    static final String TOPIC = "connect-lines";
    static final String[] INTERNAL = {"connect-configs", "connect-offsets", "connect-status"};
    static final int LINES_PER_PHASE = 500;
    static final long DEADLINE_MS = 90_000;

    /** Exits when done, pass or fail: the worker's threads would keep the JVM up. */
    public static void main(String[] args) {
        try {
            run(args);
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        String bootstrap = args[0];
        Path dir = Path.of(args[1]);
        boolean first = args[2].equals("first");
        boolean exactlyOnce = args[3].equals("exactly-once");
        Path in = dir.resolve("in.txt");
        Path out = dir.resolve("out.txt");
        int phase = first ? 0 : 1;
        var lines = new ArrayList<String>();
        for (int i = phase * LINES_PER_PHASE; i < (phase + 1) * LINES_PER_PHASE; i++) {
            lines.add("line " + i);
        }
        if (first) {
            Files.write(in, lines);
            Files.createFile(out);
        } else {
            Files.write(in, lines, java.nio.file.StandardOpenOption.APPEND);
        }
        List<String> expected = Files.readAllLines(in);

        DistributedHerder herder = new Worker().start(bootstrap, exactlyOnce);
        try {
            if (first) {
                try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
                    admin.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 1))).all().get();
                }
                createConnectors(herder, in, out);
                step("a worker joined its group; a file source and a file sink created");
            } else {
                awaitConnectors(herder);
                step("a new worker found both connectors in its config topic");
            }
            awaitLines(out, expected);
            step(expected.size() + " lines copied through the topic in order, none twice");
            for (String name : new String[] {"lines-in", "lines-out"}) {
                String state = herder.connectorStatus(name).connector().state();
                check(state.equals("RUNNING"), name + " is " + state);
            }
            checkInternalTopics(bootstrap);
            step("both connectors running; the internal topics compacted");
            if (exactlyOnce) {
                checkTransactions(bootstrap);
                step("the source task and the config topic wrote in transactions of their own ids");
            }
        } finally {
            herder.stop();
        }
        step("the worker stopped");
        System.out.println("every step passed");
    }

    /** What `ConnectDistributed` starts, but for the REST resources: a worker and its
     * herder, started. */
    static class Worker extends ConnectDistributed {
        DistributedHerder start(String bootstrap, boolean exactlyOnce) {
            Map<String, String> props = new HashMap<>();
            props.put("bootstrap.servers", bootstrap);
            props.put("group.id", "shale-connect");
            props.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
            props.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
            props.put("config.storage.topic", INTERNAL[0]);
            props.put("offset.storage.topic", INTERNAL[1]);
            props.put("status.storage.topic", INTERNAL[2]);
            for (String store : new String[] {"config", "offset", "status"}) {
                props.put(store + ".storage.replication.factor", "1");
            }
            props.put("offset.flush.interval.ms", "1000");
            props.put("listeners", "http://127.0.0.1:0");
            props.put("plugin.discovery", "service_load");
            if (exactlyOnce) {
                props.put("exactly.once.source.support", "enabled");
            }
            Plugins plugins = new Plugins(props);
            try (LoaderSwap swap = plugins.withClassLoader(plugins.delegatingLoader())) {
                DistributedConfig config = createConfig(props);
                RestClient restClient = new RestClient(config);
                var rest = new ConnectRestServer(config.rebalanceTimeout(), restClient, props);
                rest.initializeServer();
                URI url = rest.advertisedUrl();
                var policy = plugins.newPlugin(config.getString(WorkerConfig.CONNECTOR_CLIENT_POLICY_CLASS_CONFIG),
                        config, ConnectorClientConfigOverridePolicy.class);
                DistributedHerder herder =
                        createHerder(config, url.getHost() + ":" + url.getPort(), plugins, policy, rest, restClient);
                herder.start();
                return herder;
            }
        }
    }

    static void createConnectors(DistributedHerder herder, Path in, Path out) throws Exception {
        var source = Map.of("name", "lines-in",
                "connector.class", "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max", "1", "file", in.toString(), "topic", TOPIC);
        var sink = Map.of("name", "lines-out",
                "connector.class", "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max", "1", "file", out.toString(), "topics", TOPIC);
        for (var connector : List.of(Map.entry("lines-in", source), Map.entry("lines-out", sink))) {
            long end = System.currentTimeMillis() + DEADLINE_MS;
            while (true) {
                // Until the worker has joined its group and read its config topic, a
                // create is refused as not coming from the leader: asked again.
                var created = new FutureCallback<org.apache.kafka.connect.runtime.Herder.Created<
                        org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo>>();
                herder.putConnectorConfig(connector.getKey(), connector.getValue(), false, created);
                try {
                    check(created.get(30, TimeUnit.SECONDS).created(), connector.getKey() + " created");
                    break;
                } catch (java.util.concurrent.ExecutionException e) {
                    boolean refused = e.getCause() instanceof org.apache.kafka.connect.runtime.rest.errors.BadRequestException;
                    check(!refused && System.currentTimeMillis() < end, "creating " + connector.getKey() + ": " + e.getCause());
                    Thread.sleep(200);
                }
            }
        }
    }

    static void awaitConnectors(DistributedHerder herder) throws Exception {
        long end = System.currentTimeMillis() + DEADLINE_MS;
        while (true) {
            var names = new FutureCallback<java.util.Collection<String>>();
            herder.connectors(names);
            try {
                if (names.get(30, TimeUnit.SECONDS).containsAll(List.of("lines-in", "lines-out"))) {
                    return;
                }
            } catch (java.util.concurrent.ExecutionException e) {
                // Not joined yet: asked again.
            }
            check(System.currentTimeMillis() < end, "the connectors were not found in the config topic");
            Thread.sleep(200);
        }
    }

    /** Waits until `out` holds as many lines as `expected`, then checks they are the same. */
    static void awaitLines(Path out, List<String> expected) throws Exception {
        long end = System.currentTimeMillis() + DEADLINE_MS;
        List<String> got = Files.readAllLines(out);
        while (got.size() < expected.size()) {
            check(System.currentTimeMillis() < end, "only " + got.size() + " of " + expected.size() + " lines copied");
            Thread.sleep(100);
            got = Files.readAllLines(out);
        }
        check(got.equals(expected), "the copy differs: " + got.size() + " lines, first " + got.get(0)
                + ", last " + got.get(got.size() - 1));
    }

    static void checkInternalTopics(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            for (String topic : INTERNAL) {
                var resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                String policy = admin.describeConfigs(List.of(resource)).all().get().get(resource)
                        .get("cleanup.policy").value();
                check(policy.equals("compact"), topic + " has cleanup.policy " + policy);
            }
        }
    }

    static void checkTransactions(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            var ids = admin.listTransactions().all().get().stream()
                    .map(t -> t.transactionalId()).collect(java.util.stream.Collectors.toSet());
            check(ids.contains("shale-connect-lines-in-0"), "the source task's transactional id: " + ids);
            check(ids.contains("connect-cluster-shale-connect"), "the config topic's transactional id: " + ids);
        }
    }

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    static void step(String what) {
        System.out.println("ok: " + what);
    }
}
