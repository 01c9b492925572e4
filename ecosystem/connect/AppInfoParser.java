package org.apache.kafka.common.utils;

/**
 * The name connect-file 4.3.1's connectors ask for their version under. Kafka 4.4 moved the class
 * to org.apache.kafka.common.utils.internals, and connect-file 4.4.0 (built against the new name)
 * is not served by Maven Central here, so the 4.3.1 connectors run on the 4.4 runtime through this
 * one method; without it each connector's version() throws NoClassDefFoundError.
 */
public final class AppInfoParser {
    private AppInfoParser() {
    }

    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }
}
