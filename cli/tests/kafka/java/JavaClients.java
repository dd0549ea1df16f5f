// Apache Kafka's own Java client (kafka-clients) against `shale serve --kafka`, every
// step asserted: administration, idempotent produce under each compression, a classic
// group and a consumer-protocol group, offsets for times, transactions read committed, a
// consume-transform-produce loop with its offsets in the transaction, fencing, group
// offsets altered and deleted, records deleted, partitions added, a share consumer and
// its group as the admin client describes, lists and resets it.
// Run by cli/tests/kafka.rs with the jars of `scripts/java-kafka.sh` on the class path:
//   java -cp '.java-kafka/libs/*' cli/tests/kafka/java/JavaClients.java HOST:PORT

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.function.Predicate;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaClients {
    static final String ORDERS = "java-orders";
    static final int PARTITIONS = 3;
    static final String[] COMPRESSIONS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PER_COMPRESSION = 200;
    static final int RECORDS = COMPRESSIONS.length * PER_COMPRESSION;
    static final Duration DEADLINE = Duration.ofSeconds(60);

    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            administer(admin);
            Map<TopicPartition, List<RecordMetadata>> sent = produce();
            readAsClassicGroup(admin, sent);
            offsetsForTimes(sent);
            readAsConsumerProtocolGroup(admin);
            transactions();
            consumeTransformProduce(admin);
            inspect(admin);
            groupOffsets(admin);
            deleteRecordsAndAddPartitions(admin);
            shareConsumer(admin);
            admin.deleteTopics(List.of(ORDERS)).all().get();
            check(!admin.listTopics().names().get().contains(ORDERS), "a deleted topic is not listed");
            Uuid queue = admin.describeTopics(List.of("java-queue")).allTopicNames().get().get("java-queue").topicId();
            admin.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(queue))).all().get();
            check(!admin.listTopics().names().get().contains("java-queue"), "a topic deleted by its id is not listed");
            var unknown = expectFailure(
                    admin.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(queue))).all());
            check(unknown instanceof org.apache.kafka.common.errors.UnknownTopicIdException,
                    "an id no topic has: " + unknown);
            step("a topic deleted by its name, another by its id");
        }
        System.out.println("every step passed");
    }

    static void administer(Admin admin) throws Exception {
        var cluster = admin.describeCluster();
        check(!cluster.nodes().get().isEmpty(), "the cluster has a broker");
        check(cluster.clusterId().get() != null, "the cluster has an id");
        var topic = new NewTopic(ORDERS, PARTITIONS, (short) 1).configs(Map.of("retention.ms", "86400000"));
        admin.createTopics(List.of(topic)).all().get();
        var exists = expectFailure(admin.createTopics(List.of(new NewTopic(ORDERS, PARTITIONS, (short) 1))).all());
        check(exists instanceof TopicExistsException, "a second create is TopicExists: " + exists);
        TopicDescription described = admin.describeTopics(List.of(ORDERS)).allTopicNames().get().get(ORDERS);
        check(described.partitions().size() == PARTITIONS, "three partitions: " + described);
        check(!described.topicId().equals(Uuid.ZERO_UUID), "a topic id");
        var byId = admin.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(described.topicId())));
        check(byId.allTopicIds().get().get(described.topicId()).name().equals(ORDERS), "described by its id");
        var resource = new ConfigResource(ConfigResource.Type.TOPIC, ORDERS);
        check(config(admin, resource, "retention.ms").equals("86400000"), "the create's retention.ms");
        var op = new AlterConfigOp(new ConfigEntry("retention.ms", "172800000"), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
        check(config(admin, resource, "retention.ms").equals("172800000"), "retention.ms altered");
        step("topic created, described by name and id, configs read and altered");
    }

    static String config(Admin admin, ConfigResource resource, String name) throws Exception {
        return admin.describeConfigs(List.of(resource)).all().get().get(resource).get(name).value();
    }

    static Properties producerProps(String compression) {
        var props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("compression.type", compression);
        props.put("linger.ms", "5");
        return props;
    }

    /** Idempotent acks=all produce under each compression: every send acknowledged with
     * an offset, offsets of a partition increasing in the order of the sends. */
    static Map<TopicPartition, List<RecordMetadata>> produce() throws Exception {
        Map<TopicPartition, List<RecordMetadata>> sent = new HashMap<>();
        int n = 0;
        for (String compression : COMPRESSIONS) {
            try (var producer = new KafkaProducer<String, String>(producerProps(compression))) {
                var pending = new ArrayList<java.util.concurrent.Future<RecordMetadata>>();
                for (int i = 0; i < PER_COMPRESSION; i++, n++) {
                    var record = new ProducerRecord<>(ORDERS, "k" + n, compression + "-" + n);
                    record.headers().add("n", Integer.toString(n).getBytes());
                    // Kafka's headers are a list: a key may repeat, a value may be null.
                    record.headers().add("tag", "a".getBytes()).add("none", null).add("tag", "b".getBytes());
                    pending.add(producer.send(record));
                }
                for (var future : pending) {
                    RecordMetadata meta = future.get();
                    sent.computeIfAbsent(new TopicPartition(meta.topic(), meta.partition()), p -> new ArrayList<>()).add(meta);
                }
            }
        }
        for (var offsets : sent.values()) {
            for (int i = 1; i < offsets.size(); i++) {
                check(offsets.get(i).offset() > offsets.get(i - 1).offset(), "offsets increase in send order");
            }
        }
        check(sent.values().stream().mapToInt(List::size).sum() == RECORDS, "every send acknowledged");
        step("idempotent produce acknowledged under none, gzip, snappy, lz4 and zstd");
        return sent;
    }

    static Properties consumerProps(String group, String protocol) {
        var props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        if (group != null) {
            props.put("group.id", group);
            props.put("group.protocol", protocol);
        }
        return props;
    }

    /** Polls until `done` holds of what was read, or fails at the deadline. */
    static List<ConsumerRecord<String, String>> pollUntil(
            KafkaConsumer<String, String> consumer, Predicate<List<ConsumerRecord<String, String>>> done, String what) {
        var read = new ArrayList<ConsumerRecord<String, String>>();
        long end = System.nanoTime() + DEADLINE.toNanos();
        while (!done.test(read)) {
            check(System.nanoTime() < end, what + ": only " + read.size() + " records by the deadline");
            for (var record : consumer.poll(Duration.ofMillis(200))) {
                read.add(record);
            }
        }
        return read;
    }

    static void readAsClassicGroup(Admin admin, Map<TopicPartition, List<RecordMetadata>> sent) throws Exception {
        try (var consumer = new KafkaConsumer<String, String>(consumerProps("java-readers", "classic"))) {
            consumer.subscribe(List.of(ORDERS));
            var read = pollUntil(consumer, r -> r.size() >= RECORDS, "the classic group");
            check(read.size() == RECORDS, "each record once: " + read.size());
            Set<String> seen = new HashSet<>();
            for (var record : read) {
                int n = Integer.parseInt(record.key().substring(1));
                Header header = record.headers().lastHeader("n");
                check(header != null && new String(header.value()).equals(Integer.toString(n)), "header n of " + n);
                var keys = new ArrayList<String>();
                record.headers().forEach(h -> keys.add(h.key() + "=" + (h.value() == null ? "null" : new String(h.value()))));
                check(keys.equals(List.of("n=" + n, "tag=a", "none=null", "tag=b")), "headers of " + n + ": " + keys);
                check(record.value().endsWith("-" + n), "value of " + n + ": " + record.value());
                check(seen.add(record.key()), "no duplicate " + record.key());
                var tp = new TopicPartition(record.topic(), record.partition());
                check(sent.get(tp).stream().anyMatch(m -> m.offset() == record.offset()), "read at its acked offset");
            }
            consumer.commitSync();
            var ends = consumer.endOffsets(consumer.assignment());
            var committed = consumer.committed(consumer.assignment());
            for (var tp : consumer.assignment()) {
                check(committed.get(tp).offset() == ends.get(tp), "committed at the end of " + tp);
            }
            ConsumerGroupDescription group =
                    admin.describeConsumerGroups(List.of("java-readers")).all().get().get("java-readers");
            check(group.members().size() == 1, "one member described: " + group);
            check(group.members().iterator().next().assignment().topicPartitions().size() == PARTITIONS,
                    "the member holds every partition");
        }
        step("a classic group read every record once, keys, values and headers (repeated keys, null values) intact, and committed");
    }

    static void offsetsForTimes(Map<TopicPartition, List<RecordMetadata>> sent) {
        try (var consumer = new KafkaConsumer<String, String>(consumerProps(null, null))) {
            for (var entry : sent.entrySet()) {
                RecordMetadata middle = entry.getValue().get(entry.getValue().size() / 2);
                OffsetAndTimestamp found =
                        consumer.offsetsForTimes(Map.of(entry.getKey(), middle.timestamp())).get(entry.getKey());
                check(found != null && found.offset() <= middle.offset(), "offsetsForTimes at or before the record");
                check(found.timestamp() >= middle.timestamp(), "the found record is not older than asked");
                consumer.assign(List.of(entry.getKey()));
                consumer.seek(entry.getKey(), found.offset());
                var first = pollUntil(consumer, r -> !r.isEmpty(), "a seek to a time").get(0);
                check(first.offset() == found.offset(), "a seek reads from the offset found");
            }
        }
        step("offsetsForTimes found each partition's middle record, and a seek read from it");
    }

    static void readAsConsumerProtocolGroup(Admin admin) throws Exception {
        try (var consumer = new KafkaConsumer<String, String>(consumerProps("java-kip848", "consumer"))) {
            consumer.subscribe(List.of(ORDERS));
            var read = pollUntil(consumer, r -> r.size() >= RECORDS, "the consumer-protocol group");
            check(read.stream().map(ConsumerRecord::key).distinct().count() == RECORDS, "each record once");
            consumer.commitSync();
            var group = admin.describeConsumerGroups(List.of("java-kip848")).all().get().get("java-kip848");
            check(group.type() == GroupType.CONSUMER, "described as a consumer-protocol group: " + group);
            check(group.members().size() == 1, "one member: " + group);
        }
        step("a consumer-protocol (KIP-848) group read every record and is described as one");
    }

    static Properties transactionalProps(String id) {
        var props = producerProps("lz4");
        props.put("transactional.id", id);
        return props;
    }

    static void transactions() throws Exception {
        String out = "java-tx";
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(out, 2, (short) 1))).all().get();
        }
        try (var producer = new KafkaProducer<String, String>(transactionalProps("java-tx-1"))) {
            producer.initTransactions();
            for (String[] batch : new String[][] {{"committed", "10"}, {"aborted", "10"}, {"committed", "5"}}) {
                producer.beginTransaction();
                for (int i = 0; i < Integer.parseInt(batch[1]); i++) {
                    producer.send(new ProducerRecord<>(out, "t" + i, batch[0]));
                }
                if (batch[0].equals("aborted")) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
            try (var fencer = new KafkaProducer<String, String>(transactionalProps("java-tx-1"))) {
                fencer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(out, "fenced", "aborted"));
                try {
                    producer.commitTransaction();
                    throw new AssertionError("a fenced producer committed");
                } catch (ProducerFencedException | org.apache.kafka.common.errors.InvalidProducerEpochException e) {
                    // The newer producer of the same transactional id fenced it.
                }
            }
        }
        for (String isolation : new String[] {"read_committed", "read_uncommitted"}) {
            var props = consumerProps(null, null);
            props.put("isolation.level", isolation);
            try (var consumer = new KafkaConsumer<String, String>(props)) {
                var partitions = List.of(new TopicPartition(out, 0), new TopicPartition(out, 1));
                consumer.assign(partitions);
                var ends = consumer.endOffsets(partitions);
                var read = pollUntil(consumer,
                        r -> partitions.stream().allMatch(tp -> consumer.position(tp) >= ends.get(tp)), isolation);
                check(read.size() == 15, isolation + " reads the 15 committed records: " + read.size());
                check(read.stream().allMatch(r -> r.value().equals("committed")), isolation + " shows no aborted record");
            }
        }
        step("transactions committed and aborted, a fenced producer refused, no aborted record shown");
    }

    /** Reads the orders in a group and writes one output per input in transactions that
     * carry the group's offsets; afterwards the group's offsets are at the ends and every
     * input has exactly one output. */
    static void consumeTransformProduce(Admin admin) throws Exception {
        String out = "java-eos-out";
        admin.createTopics(List.of(new NewTopic(out, 1, (short) 1))).all().get();
        var producer = new KafkaProducer<String, String>(transactionalProps("java-eos-1"));
        var consumer = new KafkaConsumer<String, String>(consumerProps("java-eos", "classic"));
        try (producer; consumer) {
            producer.initTransactions();
            consumer.subscribe(List.of(ORDERS));
            int copied = 0;
            long end = System.nanoTime() + DEADLINE.toNanos();
            while (copied < RECORDS) {
                check(System.nanoTime() < end, "the pipeline copied only " + copied);
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (var record : records) {
                    producer.send(new ProducerRecord<>(out, record.key(), record.value().toUpperCase()));
                    offsets.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1, "through " + record.offset()));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                copied += records.count();
            }
        }
        var committed = admin.listConsumerGroupOffsets("java-eos").partitionsToOffsetAndMetadata().get();
        var latest = latestOffsets(admin, ORDERS, PARTITIONS);
        for (var entry : latest.entrySet()) {
            var offset = committed.get(entry.getKey());
            check(offset.offset() == entry.getValue(), "the pipeline's offsets at the end");
            check(offset.metadata().equals("through " + (entry.getValue() - 1)),
                    "the metadata committed in the transaction: " + offset);
        }
        var props = consumerProps(null, null);
        props.put("isolation.level", "read_committed");
        try (var reader = new KafkaConsumer<String, String>(props)) {
            var tp = new TopicPartition(out, 0);
            reader.assign(List.of(tp));
            var read = pollUntil(reader, r -> r.size() >= RECORDS, "the pipeline's output");
            check(read.stream().map(ConsumerRecord::key).distinct().count() == RECORDS, "one output per input");
        }
        step("consume-transform-produce with the group's offsets in each transaction");
    }

    static Map<TopicPartition, Long> latestOffsets(Admin admin, String topic, int partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            ask.put(new TopicPartition(topic, p), OffsetSpec.latest());
        }
        return admin.listOffsets(ask).all().get().entrySet().stream()
                .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
    }

    /** What consoles and operators ask of a cluster: log directories, a partition's
     * producers, transactions, the offset of the newest timestamp. */
    static void inspect(Admin admin) throws Exception {
        // Each partition is in its leader's log directory alone (agents lead some each).
        var brokers = admin.describeCluster().nodes().get().stream().map(node -> node.id()).toList();
        var held = admin.describeLogDirs(brokers).allDescriptions().get().values().stream()
                .flatMap(dirs -> dirs.values().stream())
                .flatMap(dir -> dir.replicaInfos().keySet().stream())
                .filter(tp -> tp.topic().equals(ORDERS))
                .toList();
        check(held.size() == PARTITIONS && new HashSet<>(held).size() == PARTITIONS,
                "the log directories hold every partition once: " + held);
        var tp = new TopicPartition(ORDERS, 0);
        var producers = admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
        check(!producers.isEmpty(), "the idempotent producers of partition 0 are listed");
        var listed = admin.listTransactions().all().get().stream().map(t -> t.transactionalId()).toList();
        check(listed.containsAll(List.of("java-tx-1", "java-eos-1")), "transactions listed: " + listed);
        var matching = admin.listTransactions(new ListTransactionsOptions().filterOnTransactionalIdPattern("java-eos-.*"))
                .all().get().stream().map(t -> t.transactionalId()).toList();
        check(matching.contains("java-eos-1") && !matching.contains("java-tx-1"), "listed by a pattern: " + matching);
        var described = admin.describeTransactions(List.of("java-eos-1")).all().get().get("java-eos-1");
        check(described.state() == org.apache.kafka.clients.admin.TransactionState.COMPLETE_COMMIT,
                "the pipeline's last transaction committed: " + described);
        var newest = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).all().get().get(tp);
        var latest = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp);
        check(newest.offset() >= 0 && newest.offset() < latest.offset(), "the newest timestamp's offset: " + newest);
        var topic = new ConfigResource(ConfigResource.Type.TOPIC, ORDERS);
        var options = new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true);
        var retention = admin.describeConfigs(List.of(topic), options).all().get().get(topic).get("retention.ms");
        var fallback = retention.synonyms().get(retention.synonyms().size() - 1);
        check(fallback.name().equals("log.retention.ms") && fallback.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG,
                "retention.ms falls back to the broker's log.retention.ms: " + retention.synonyms());
        check(retention.type() == ConfigEntry.ConfigType.LONG && retention.documentation() != null,
                "retention.ms is a documented LONG: " + retention);
        try {
            admin.describeAcls(AclBindingFilter.ANY).values().get();
            throw new AssertionError("ACLs were listed");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof SecurityDisabledException, "no authorizer: " + e.getCause());
        }
        step("log directories, producers, transactions, the newest timestamp's offset and config synonyms described;"
                + " ACLs answered as by a broker without an authorizer");
    }

    static void groupOffsets(Admin admin) throws Exception {
        var listed = admin.listGroups().all().get().stream().map(g -> g.groupId()).collect(Collectors.toSet());
        check(listed.containsAll(List.of("java-readers", "java-kip848", "java-eos")), "groups listed: " + listed);
        var tp = new TopicPartition(ORDERS, 0);
        admin.alterConsumerGroupOffsets("java-readers", Map.of(tp, new OffsetAndMetadata(3, "kept"))).all().get();
        var offsets = admin.listConsumerGroupOffsets("java-readers").partitionsToOffsetAndMetadata().get();
        check(offsets.get(tp).offset() == 3 && offsets.get(tp).metadata().equals("kept"),
                "an altered offset read back with its metadata: " + offsets);
        admin.deleteConsumerGroupOffsets("java-readers", Set.of(tp)).all().get();
        offsets = admin.listConsumerGroupOffsets("java-readers").partitionsToOffsetAndMetadata().get();
        check(offsets.get(tp) == null, "a deleted offset is gone: " + offsets);
        admin.deleteConsumerGroups(List.of("java-readers")).all().get();
        offsets = admin.listConsumerGroupOffsets("java-readers").partitionsToOffsetAndMetadata().get();
        check(offsets.isEmpty(), "a deleted group has no offsets: " + offsets);
        step("groups listed, an offset altered (with its metadata) and deleted, a group deleted");
    }

    static void deleteRecordsAndAddPartitions(Admin admin) throws Exception {
        var tp = new TopicPartition(ORDERS, 0);
        admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(10))).all().get();
        long earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get().get(tp).offset();
        check(earliest == 10, "records before 10 deleted: earliest " + earliest);
        long local = admin.listOffsets(Map.of(tp, OffsetSpec.earliestLocal())).all().get().get(tp).offset();
        check(local == 10, "the earliest local offset is the earliest: " + local);
        long tiered = admin.listOffsets(Map.of(tp, OffsetSpec.latestTiered())).all().get().get(tp).offset();
        check(tiered == -1, "nothing tiered to remote storage: " + tiered);
        admin.createPartitions(Map.of(ORDERS, NewPartitions.increaseTo(PARTITIONS + 1))).all().get();
        int now = admin.describeTopics(List.of(ORDERS)).allTopicNames().get().get(ORDERS).partitions().size();
        check(now == PARTITIONS + 1, "a partition added: " + now);
        step("records deleted before an offset (earliest and earliest local 10, latest tiered -1), a partition added");
    }

    /** Kafka's share consumer (KIP-932): records produced after the group starts are
     * delivered, each once, and a released one comes back with its delivery count raised. */
    static void shareConsumer(Admin admin) throws Exception {
        String topic = "java-queue";
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        var props = consumerProps(null, null);
        props.remove("auto.offset.reset");
        props.remove("enable.auto.commit");
        props.put("group.id", "java-share");
        props.put("share.acknowledgement.mode", "explicit");
        try (var consumer = new KafkaShareConsumer<String, String>(props);
                var producer = new KafkaProducer<String, String>(producerProps("none"))) {
            consumer.subscribe(List.of(topic));
            // The group starts at the latest offset: probes are produced until one is
            // delivered, so the records below are produced after the group started.
            long probing = System.nanoTime() + DEADLINE.toNanos();
            boolean started = false;
            for (int n = 0; !started; n++) {
                check(System.nanoTime() < probing, "no probe delivered to the share consumer");
                producer.send(new ProducerRecord<>(topic, "probe" + n, "probe")).get();
                for (var record : consumer.poll(Duration.ofMillis(200))) {
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    started = true;
                }
            }
            consumer.commitSync();
            for (int i = 0; i < 20; i++) {
                producer.send(new ProducerRecord<>(topic, "q" + i, "queued")).get();
            }
            Map<String, Integer> deliveries = new HashMap<>();
            boolean released = false;
            long end = System.nanoTime() + DEADLINE.toNanos();
            while (deliveries.size() < 20 || !released) {
                check(System.nanoTime() < end, "the share consumer got only " + deliveries.keySet());
                for (var record : consumer.poll(Duration.ofMillis(200))) {
                    if (record.key().startsWith("probe")) {
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                        continue;
                    }
                    int count = record.deliveryCount().orElse((short) 0);
                    if (record.key().equals("q0") && !released) {
                        check(count == 1, "a first delivery counts 1: " + count);
                        consumer.acknowledge(record, AcknowledgeType.RELEASE);
                        released = true;
                        continue;
                    }
                    if (record.key().equals("q0")) {
                        check(count == 2, "a released record comes back counted twice: " + count);
                    }
                    check(deliveries.put(record.key(), count) == null, "delivered once: " + record.key());
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                }
                consumer.commitSync();
            }
            step("a share consumer received each record once and a released one again");
            shareGroupAdmin(admin, new TopicPartition(topic, 0));
            var refused = expectFailure(admin.alterShareGroupOffsets("java-share",
                    Map.of(new TopicPartition(topic, 0), 0L)).all());
            check(refused instanceof GroupNotEmptyException, "offsets reset with a member in the group: " + refused);
        }
        shareGroupReset(admin, new TopicPartition(topic, 0));
    }

    /** The share group "java-share" once its member left: its start offset moved back
     * five records, which a new share consumer is handed again, each as a first delivery;
     * then its start offsets deleted. */
    static void shareGroupReset(Admin admin, TopicPartition partition) throws Exception {
        awaitEmptyShareGroup(admin);
        long end = admin.listOffsets(Map.of(partition, OffsetSpec.latest())).all().get().get(partition).offset();
        admin.alterShareGroupOffsets("java-share", Map.of(partition, end - 5)).all().get();
        var missing = new TopicPartition(partition.topic(), 9);
        var unknown = expectFailure(admin.alterShareGroupOffsets("java-share", Map.of(missing, 0L)).all());
        check(unknown instanceof UnknownTopicOrPartitionException, "a partition that does not exist: " + unknown);
        var offsets = admin.listShareGroupOffsets(Map.of("java-share", new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo("java-share").get();
        check(offsets.get(partition) != null && offsets.get(partition).startOffset() == end - 5,
                "the start offset moved back to " + (end - 5) + ": " + offsets);
        var props = consumerProps(null, null);
        props.remove("auto.offset.reset");
        props.remove("enable.auto.commit");
        props.put("group.id", "java-share");
        props.put("share.acknowledgement.mode", "explicit");
        List<String> again = new ArrayList<>();
        try (var consumer = new KafkaShareConsumer<String, String>(props)) {
            consumer.subscribe(List.of(partition.topic()));
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (again.size() < 5) {
                check(System.nanoTime() < deadline, "handed again only " + again);
                for (var record : consumer.poll(Duration.ofMillis(200))) {
                    check(record.offset() >= end - 5, "a record before the new start: " + record.offset());
                    check(record.deliveryCount().orElse((short) 0) == 1, "a first delivery: " + record);
                    again.add(record.key());
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                }
                consumer.commitSync();
            }
        }
        check(again.equals(List.of("q15", "q16", "q17", "q18", "q19")), "the last five handed again: " + again);
        step("a share group's start offset reset by the admin client, and its records handed out again");
        awaitEmptyShareGroup(admin);
        admin.deleteShareGroupOffsets("java-share", Set.of(partition.topic())).all().get();
        offsets = admin.listShareGroupOffsets(Map.of("java-share", new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo("java-share").get();
        check(offsets.get(partition) == null, "no start offset once deleted: " + offsets);
        step("a share group's start offsets deleted by the admin client");
    }

    /** Waits until "java-share" has no members (a closed share consumer has left). */
    static void awaitEmptyShareGroup(Admin admin) throws Exception {
        long deadline = System.nanoTime() + DEADLINE.toNanos();
        while (admin.describeShareGroups(List.of("java-share")).describedGroups().get("java-share").get()
                .groupState() != GroupState.EMPTY) {
            check(System.nanoTime() < deadline, "the share group still has members");
            Thread.sleep(50);
        }
    }

    /** What `future` failed with; an assertion error if it did not fail. */
    static Throwable expectFailure(org.apache.kafka.common.KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get();
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("succeeded where a failure was expected");
    }

    /** The share group "java-share", its one member still in it, as the admin client
     * describes, lists and reads it: every record of `partition` done with. */
    static void shareGroupAdmin(Admin admin, TopicPartition partition) throws Exception {
        var group = admin.describeShareGroups(List.of("java-share")).describedGroups().get("java-share").get();
        check(group.groupState() == GroupState.STABLE, "a share group with a member is stable: " + group);
        check(group.members().size() == 1, "one member: " + group.members());
        var holds = group.members().iterator().next().assignment().topicPartitions();
        check(holds.equals(Set.of(partition)), "the member holds the partition: " + holds);
        long end = admin.listOffsets(Map.of(partition, OffsetSpec.latest())).all().get().get(partition).offset();
        var offsets = admin.listShareGroupOffsets(Map.of("java-share", new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo("java-share").get();
        check(offsets.get(partition) != null && offsets.get(partition).startOffset() == end,
                "every record done with: the start offset is the end, " + end + ": " + offsets);
        var listed = admin.listGroups(ListGroupsOptions.forShareGroups()).all().get();
        check(listed.stream().anyMatch(g -> g.groupId().equals("java-share")
                && g.type().equals(java.util.Optional.of(GroupType.SHARE))), "listed as a share group: " + listed);
        step("the share group described, its start offset read and the group listed as a share group");
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
