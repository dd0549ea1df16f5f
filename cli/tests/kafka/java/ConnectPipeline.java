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
// `debezium PG_PORT first|again` instead runs Debezium's PostgreSQL connector in the
// worker against the PostgreSQL server on that loopback port: a table's snapshot, then
// an insert, an update and a delete, arrive in the table's topic in commit order; again
// (the server restarted, rows changed meanwhile), a new worker streams only those.
//
//   java -cp '.java-kafka/libs/*' cli/tests/kafka/java/ConnectPipeline.java \
//       HOST:PORT DIR first|again at-least-once|exactly-once
//   java -cp '.java-kafka/libs/*' cli/tests/kafka/java/ConnectPipeline.java HOST:PORT debezium PG_PORT first|again

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
        if (args[1].equals("debezium")) {
            debezium(bootstrap, Integer.parseInt(args[2]), args[3].equals("first"));
            return;
        }
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
                awaitConnectors(herder, List.of("lines-in", "lines-out"));
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
        createConnector(herder, "lines-in", source);
        createConnector(herder, "lines-out", sink);
    }

    static void createConnector(DistributedHerder herder, String name, Map<String, String> config) throws Exception {
        long end = System.currentTimeMillis() + DEADLINE_MS;
        while (true) {
            // Until the worker has joined its group and read its config topic, a create
            // is refused as not coming from the leader: asked again.
            var created = new FutureCallback<org.apache.kafka.connect.runtime.Herder.Created<
                    org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo>>();
            herder.putConnectorConfig(name, config, false, created);
            try {
                check(created.get(30, TimeUnit.SECONDS).created(), name + " created");
                return;
            } catch (java.util.concurrent.ExecutionException e) {
                boolean refused = e.getCause() instanceof org.apache.kafka.connect.runtime.rest.errors.BadRequestException;
                check(!refused && System.currentTimeMillis() < end, "creating " + name + ": " + e.getCause());
                Thread.sleep(200);
            }
        }
    }

    /** Debezium's PostgreSQL connector (change data capture over logical replication) in
     * the worker. First: a table's snapshot, then its insert, update and delete, arrive in
     * the topic Connect creates for it, in the order they were committed. Again (the worker
     * stopped, rows changed meanwhile, the server restarted): a new worker finds the
     * connector and its place in the replication stream, and a reader of the same group
     * gets the changes made while it was down, and nothing else. */
    static void debezium(String bootstrap, int pgPort, boolean first) throws Exception {
        String jdbc = "jdbc:postgresql://127.0.0.1:" + pgPort + "/postgres";
        if (first) {
            execute(jdbc, "CREATE TABLE orders (id integer PRIMARY KEY, item text NOT NULL)",
                    "INSERT INTO orders VALUES (1, 'anvil'), (2, 'rope'), (3, 'rocket')");
        } else {
            execute(jdbc, "INSERT INTO orders VALUES (5, 'sprocket')", "UPDATE orders SET item = 'magnets' WHERE id = 4");
        }
        DistributedHerder herder = new Worker().start(bootstrap, false);
        var props = new java.util.Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.deserializer", org.apache.kafka.common.serialization.StringDeserializer.class.getName());
        props.put("value.deserializer", org.apache.kafka.common.serialization.StringDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        props.put("group.id", "cdc-reader");
        try (var consumer = new org.apache.kafka.clients.consumer.KafkaConsumer<String, String>(props)) {
            if (first) {
                createConnector(herder, "pg-orders", debeziumConfig(pgPort));
                step("Debezium's PostgreSQL connector created");
                consumer.subscribe(List.of("pg.public.orders"));
                var snapshot = readChanges(consumer, 3);
                check(snapshot.equals(List.of("r 1 anvil", "r 2 rope", "r 3 rocket")), "the snapshot: " + snapshot);
                step("the table's snapshot read from its topic");
                execute(jdbc, "INSERT INTO orders VALUES (4, 'magnet')",
                        "UPDATE orders SET item = 'giant rocket' WHERE id = 3", "DELETE FROM orders WHERE id = 2");
                var changes = readChanges(consumer, 4);
                check(changes.equals(List.of("c 4 magnet", "u 3 giant rocket", "d 2", "tombstone 2")),
                        "the changes, in commit order: " + changes);
                step("an insert, an update and a delete (and its tombstone) streamed in commit order");
            } else {
                awaitConnectors(herder, List.of("pg-orders"));
                consumer.subscribe(List.of("pg.public.orders"));
                var changes = readChanges(consumer, 2);
                check(changes.equals(List.of("c 5 sprocket", "u 4 magnets")),
                        "only the changes made while the worker was down: " + changes);
                step("a new worker resumed the replication stream where the last stopped");
            }
            consumer.commitSync();
        } finally {
            herder.stop();
        }
        System.out.println("every step passed");
    }

    static Map<String, String> debeziumConfig(int pgPort) {
        var config = new HashMap<String, String>();
        config.put("name", "pg-orders");
        config.put("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        config.put("database.hostname", "127.0.0.1");
        config.put("database.port", Integer.toString(pgPort));
        config.put("database.user", "postgres");
        config.put("database.password", "");
        config.put("database.dbname", "postgres");
        config.put("topic.prefix", "pg");
        config.put("plugin.name", "pgoutput");
        config.put("slot.name", "shale");
        config.put("table.include.list", "public.orders");
        config.put("topic.creation.default.replication.factor", "1");
        config.put("topic.creation.default.partitions", "1");
        config.put("key.converter", "org.apache.kafka.connect.json.JsonConverter");
        config.put("key.converter.schemas.enable", "false");
        config.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        config.put("value.converter.schemas.enable", "false");
        return config;
    }

    static void execute(String jdbc, String... statements) throws Exception {
        try (var db = java.sql.DriverManager.getConnection(jdbc, "postgres", "");
                var sql = db.createStatement()) {
            for (String statement : statements) {
                sql.execute(statement);
            }
        }
    }

    /** The next `count` change events: `op id item` (the row after), `d id` for a delete,
     * or `tombstone id`. */
    static List<String> readChanges(org.apache.kafka.clients.consumer.KafkaConsumer<String, String> consumer, int count)
            throws Exception {
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        var changes = new ArrayList<String>();
        long end = System.currentTimeMillis() + DEADLINE_MS;
        while (changes.size() < count) {
            check(System.currentTimeMillis() < end, "only these changes arrived: " + changes);
            for (var record : consumer.poll(java.time.Duration.ofMillis(200))) {
                String id = mapper.readTree(record.key()).get("id").asText();
                if (record.value() == null) {
                    changes.add("tombstone " + id);
                    continue;
                }
                var event = mapper.readTree(record.value());
                String op = event.get("op").asText();
                // A delete's row before holds only the key (the table's default replica identity).
                changes.add(op.equals("d") ? "d " + id : op + " " + id + " " + event.get("after").get("item").asText());
            }
        }
        return changes;
    }

    static void awaitConnectors(DistributedHerder herder, List<String> expected) throws Exception {
        long end = System.currentTimeMillis() + DEADLINE_MS;
        while (true) {
            var names = new FutureCallback<java.util.Collection<String>>();
            herder.connectors(names);
            try {
                if (names.get(30, TimeUnit.SECONDS).containsAll(expected)) {
                    return;
                }
            } catch (java.util.concurrent.ExecutionException e) {
                // Not joined yet: asked again.
            }
            check(System.currentTimeMillis() < end, expected + " were not found in the config topic");
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
