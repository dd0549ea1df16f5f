// Kafka's Java client logging in over SASL_SSL with access tokens, the server's CA given as
// a PEM trust store: the root token with PLAIN creates two topics; a token scoped to the
// streams `orders/` with read and append logs in with SCRAM-SHA-256 and SCRAM-SHA-512 (its
// id and secret), produces to and consumes `orders`, sees no other topic and may not
// produce to one; each token's authorized operations on the topic, the cluster and a group
// are what it permits; a wrong secret is refused. Every step asserts.
//   java -cp '.java-kafka/libs/*' cli/tests/kafka/java/JavaSasl.java BOOTSTRAP CA_FILE ROOT_TOKEN TOKEN_ID TOKEN_SECRET

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import static org.apache.kafka.common.acl.AclOperation.*;

public class JavaSasl {
    static String bootstrap;
    static String caFile;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        caFile = args[1];
        String root = args[2];
        String tokenId = args[3];
        String secret = args[4];

        try (Admin admin = Admin.create(client("PLAIN", "root", root))) {
            admin.createTopics(List.of(new NewTopic("orders", 1, (short) 1), new NewTopic("payroll", 1, (short) 1)))
                    .all().get();
        }
        step("the root token (PLAIN) created two topics");

        for (String mechanism : new String[] {"SCRAM-SHA-256", "SCRAM-SHA-512"}) {
            Properties props = client(mechanism, tokenId, secret);
            try (var producer = new KafkaProducer<String, String>(withSerializers(props))) {
                producer.send(new ProducerRecord<>("orders", "via-" + mechanism)).get();
                try {
                    producer.send(new ProducerRecord<>("payroll", "not mine")).get();
                    throw new AssertionError("produced outside the token");
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof TopicAuthorizationException, "refused: " + e.getCause());
                }
            }
            try (Admin admin = Admin.create(props)) {
                var names = admin.listTopics().names().get();
                check(names.equals(java.util.Set.of("orders")), "the token sees only its topic: " + names);
            }
            var consumerProps = withDeserializers(client(mechanism, tokenId, secret));
            consumerProps.put("group.id", "java-" + mechanism);
            consumerProps.put("auto.offset.reset", "earliest");
            try (var consumer = new KafkaConsumer<String, String>(consumerProps)) {
                consumer.subscribe(List.of("orders"));
                long end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                boolean found = false;
                while (!found) {
                    check(System.nanoTime() < end, "the consumer did not read via-" + mechanism);
                    for (var record : consumer.poll(Duration.ofMillis(200))) {
                        found |= record.value().equals("via-" + mechanism);
                    }
                }
            }
            step("the scoped token logged in with " + mechanism + ", produced, listed and consumed within its scope");
        }

        try (Admin admin = Admin.create(client("SCRAM-SHA-256", tokenId, secret))) {
            check(topicOperations(admin).equals(Set.of(READ, WRITE, DESCRIBE)),
                    "the scoped token reads, writes and describes orders: " + topicOperations(admin));
            check(clusterOperations(admin).equals(Set.of(DESCRIBE, DESCRIBE_CONFIGS, IDEMPOTENT_WRITE)),
                    "on the cluster it describes and gets producer ids: " + clusterOperations(admin));
            var group = "java-SCRAM-SHA-256";
            var described = admin.describeConsumerGroups(List.of(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all().get().get(group);
            check(described.authorizedOperations().equals(Set.of(READ, DESCRIBE, DELETE)),
                    "it uses groups: " + described.authorizedOperations());
        }
        try (Admin admin = Admin.create(client("PLAIN", "root", root))) {
            check(topicOperations(admin).equals(
                    Set.of(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)),
                    "the root token may do all Kafka supports on a topic: " + topicOperations(admin));
            check(clusterOperations(admin).equals(Set.of(CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                    IDEMPOTENT_WRITE, ALTER, DESCRIBE)), "and on the cluster: " + clusterOperations(admin));
            var plain = admin.describeTopics(List.of("orders")).allTopicNames().get().get("orders");
            check(plain.authorizedOperations() == null, "not asked, not answered: " + plain.authorizedOperations());
            try {
                admin.describeAcls(AclBindingFilter.ANY).values().get();
                throw new AssertionError("ACLs were listed");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof SecurityDisabledException
                        && e.getCause().getMessage().contains("access tokens"), "tokens, not ACLs: " + e.getCause());
            }
        }
        step("authorized operations answered as each token permits, when asked; ACLs refused for tokens");

        var wrong = withSerializers(client("SCRAM-SHA-256", tokenId, secret + "x"));
        wrong.put("max.block.ms", "10000");
        try (var producer = new KafkaProducer<String, String>(wrong)) {
            producer.send(new ProducerRecord<>("orders", "wrong secret")).get();
            throw new AssertionError("a wrong secret produced");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof SaslAuthenticationException, "a wrong secret is refused: " + e.getCause());
        }
        step("a wrong secret is refused");

        try (Admin admin = Admin.create(client("PLAIN", "root", root))) {
            var orders = new TopicPartition("orders", 0);
            var payroll = new TopicPartition("payroll", 0);
            var ends = admin.listOffsets(Map.of(orders, OffsetSpec.latest(), payroll, OffsetSpec.latest())).all().get();
            check(ends.get(orders).offset() == 2, "orders holds the two records: " + ends);
            check(ends.get(payroll).offset() == 0, "payroll stayed empty: " + ends);
        }
        step("the root token read what the scoped token wrote; payroll stayed empty");
        System.out.println("every step passed");
    }

    static Set<AclOperation> topicOperations(Admin admin) throws Exception {
        var options = new DescribeTopicsOptions().includeAuthorizedOperations(true);
        return admin.describeTopics(List.of("orders"), options).allTopicNames().get().get("orders")
                .authorizedOperations();
    }

    static Set<AclOperation> clusterOperations(Admin admin) throws Exception {
        var options = new DescribeClusterOptions().includeAuthorizedOperations(true);
        return admin.describeCluster(options).authorizedOperations().get();
    }

    static Properties client(String mechanism, String username, String password) {
        var props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("security.protocol", "SASL_SSL");
        props.put("ssl.truststore.type", "PEM");
        props.put("ssl.truststore.location", caFile);
        props.put("sasl.mechanism", mechanism);
        String module = mechanism.equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        props.put("sasl.jaas.config",
                module + " required username=\"" + username + "\" password=\"" + password + "\";");
        return props;
    }

    static Properties withSerializers(Properties props) {
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        return props;
    }

    static Properties withDeserializers(Properties props) {
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return props;
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
