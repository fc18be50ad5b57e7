// Package metricname is the one home of the names of every metric the
// gateway exports: the exporters (gateway/metrics, the components'
// collectors) register them by these constants, dashboards/gen builds its
// queries from them, and the tests of cmd/holo-gateway check that every
// metric an alerting or recording rule (deploy/monitoring) or a dashboard
// reads is one of them and that a real gateway exports it. Renaming a
// metric is so a change here, which the compiler carries to exporters and
// dashboards and the tests to the rules; a name spelt anywhere else in the
// gateway's code fails TestMetricNamesHaveOneHome.
//
// A histogram's constant is its base name; its series add _bucket, _sum
// and _count (Bucket, Sum, Count). What each metric means is in
// docs/metrics.md.
package metricname

// Suffixes of a histogram's series.
const (
	Bucket = "_bucket"
	Sum    = "_sum"
	Count  = "_count"
)

// API (gateway/api).
const (
	GatewayAPIRequestSeconds = "holo_gateway_api_request_seconds"
	GatewayAPIRequestsTotal  = "holo_gateway_api_requests_total"
)

// Audit log (gateway/audit).
const (
	GatewayAuditAggregatedTotal = "holo_gateway_audit_aggregated_total"
	GatewayAuditDroppedTotal    = "holo_gateway_audit_dropped_total"
	GatewayAuditRecordsTotal    = "holo_gateway_audit_records_total"
)

// Cluster (gateway/cluster).
const (
	GatewayClusterBoards                     = "holo_gateway_cluster_boards"
	GatewayClusterCoordinator                = "holo_gateway_cluster_coordinator"
	GatewayClusterEventsLostTotal            = "holo_gateway_cluster_events_lost_total"
	GatewayClusterEventsPending              = "holo_gateway_cluster_events_pending"
	GatewayClusterEventsPublishedTotal       = "holo_gateway_cluster_events_published_total"
	GatewayClusterGatewayBoards              = "holo_gateway_cluster_gateway_boards"
	GatewayClusterGatewayHeartbeatAgeSeconds = "holo_gateway_cluster_gateway_heartbeat_age_seconds"
	GatewayClusterGatewayLines               = "holo_gateway_cluster_gateway_lines"
	GatewayClusterGatewayUp                  = "holo_gateway_cluster_gateway_up"
	GatewayClusterPartitioned                = "holo_gateway_cluster_partitioned"
	GatewayClusterReconnectsTotal            = "holo_gateway_cluster_reconnects_total"
	GatewayClusterRecordConflictsTotal       = "holo_gateway_cluster_record_conflicts_total"
	GatewayClusterRecordWritesTotal          = "holo_gateway_cluster_record_writes_total"
	GatewayClusterRoutedTotal                = "holo_gateway_cluster_routed_total"
	GatewayClusterStandbyBoards              = "holo_gateway_cluster_standby_boards"
	GatewayClusterTakeoversTotal             = "holo_gateway_cluster_takeovers_total"
)

// Commands (gateway/metrics/commands.go).
const (
	GatewayCommandDurationSeconds = "holo_gateway_command_duration_seconds"
	GatewayCommandFailuresTotal   = "holo_gateway_command_failures_total"
)

// Cue lists (gateway/cue).
const (
	CueFiresFailedTotal = "holo_cue_fires_failed_total"
	CueFiresTotal       = "holo_cue_fires_total"
)

// DMX inputs (gateway/dmx).
const (
	DMXArtPollTotal       = "holo_dmx_artpoll_total"
	DMXChangesFailedTotal = "holo_dmx_changes_failed_total"
	DMXChangesSentTotal   = "holo_dmx_changes_sent_total"
	DMXCoalescedTotal     = "holo_dmx_coalesced_total"
	DMXDroppedTotal       = "holo_dmx_dropped_total"
	DMXLatencySeconds     = "holo_dmx_latency_seconds"
	DMXLineSecondsTotal   = "holo_dmx_line_seconds_total"
	DMXLineShare          = "holo_dmx_line_share"
	DMXMergesTotal        = "holo_dmx_merges_total"
	DMXPacketsTotal       = "holo_dmx_packets_total"
	DMXSourcesLostTotal   = "holo_dmx_sources_lost_total"
	DMXSyncPacketsTotal   = "holo_dmx_sync_packets_total"
)

// Fleet and boards (gateway/metrics).
const (
	GatewayBoardClockOffsetSeconds       = "holo_gateway_board_clock_offset_seconds"
	GatewayBoardClockUncertaintySeconds  = "holo_gateway_board_clock_uncertainty_seconds"
	GatewayBoardEventsTotal              = "holo_gateway_board_events_total"
	GatewayBoardGroup                    = "holo_gateway_board_group"
	GatewayBoardHeapFreeBytes            = "holo_gateway_board_heap_free_bytes"
	GatewayBoardInfo                     = "holo_gateway_board_info"
	GatewayBoardLastSeenTimestampSeconds = "holo_gateway_board_last_seen_timestamp_seconds"
	GatewayBoardLinkBadCRCTotal          = "holo_gateway_board_link_bad_crc_total"
	GatewayBoardLinkBadFramesTotal       = "holo_gateway_board_link_bad_frames_total"
	GatewayBoardLinkErrorsTotal          = "holo_gateway_board_link_errors_total"
	GatewayBoardLinkFramesTotal          = "holo_gateway_board_link_frames_total"
	GatewayBoardLinkGarbageTotal         = "holo_gateway_board_link_garbage_total"
	GatewayBoardLinkJSONLinesTotal       = "holo_gateway_board_link_json_lines_total"
	GatewayBoardLinkOverrunsTotal        = "holo_gateway_board_link_overruns_total"
	GatewayBoardLinkReceiveBytesTotal    = "holo_gateway_board_link_receive_bytes_total"
	GatewayBoardLinkTimeoutsTotal        = "holo_gateway_board_link_timeouts_total"
	GatewayBoardLinkTransmitBytesTotal   = "holo_gateway_board_link_transmit_bytes_total"
	GatewayBoardLinkTransmitDroppedTotal = "holo_gateway_board_link_transmit_dropped_total"
	GatewayBoardOnline                   = "holo_gateway_board_online"
	GatewayBoardReachable                = "holo_gateway_board_reachable"
	GatewayBoardUptimeSeconds            = "holo_gateway_board_uptime_seconds"
	GatewayBoardWiFiRSSIDBm              = "holo_gateway_board_wifi_rssi_dbm"
	GatewayBoards                        = "holo_gateway_boards"
	GatewayBuildInfo                     = "holo_gateway_build_info"
	GatewayEventWatchers                 = "holo_gateway_event_watchers"
	GatewayEventsDroppedTotal            = "holo_gateway_events_dropped_total"
	GatewayEventsDuplicateTotal          = "holo_gateway_events_duplicate_total"
	GatewayEventsPublishedTotal          = "holo_gateway_events_published_total"
	GatewayEventsReceivedTotal           = "holo_gateway_events_received_total"
	GatewayEventsReplayMissedTotal       = "holo_gateway_events_replay_missed_total"
	GatewayEventsUnattributedTotal       = "holo_gateway_events_unattributed_total"
	GatewayRegistryWriteErrorsTotal      = "holo_gateway_registry_write_errors_total"
)

// Installation drift (gateway/installation).
const (
	GatewayInstallationBoardInSync = "holo_gateway_installation_board_in_sync"
	GatewayInstallationBoards      = "holo_gateway_installation_boards"
	GatewayInstallationHealsTotal  = "holo_gateway_installation_heals_total"
	GatewayInstallationRevision    = "holo_gateway_installation_revision"
)

// MQTT bridge (gateway/mqtt).
const (
	MQTTCommandsTotal         = "holo_mqtt_commands_total"
	MQTTConnected             = "holo_mqtt_connected"
	MQTTConnectsTotal         = "holo_mqtt_connects_total"
	MQTTDroppedTotal          = "holo_mqtt_dropped_total"
	MQTTHappeningsTotal       = "holo_mqtt_happenings_total"
	MQTTPublishLatencySeconds = "holo_mqtt_publish_latency_seconds"
	MQTTPublishedTotal        = "holo_mqtt_published_total"
	MQTTQueuedTotal           = "holo_mqtt_queued_total"
	MQTTRetriesTotal          = "holo_mqtt_retries_total"
	MQTTSpilledTotal          = "holo_mqtt_spilled_total"
	MQTTSpoolMessages         = "holo_mqtt_spool_messages"
)

// OSC (gateway/osc).
const (
	OSCBundlesRefusedTotal     = "holo_osc_bundles_refused_total"
	OSCFeedbackTotal           = "holo_osc_feedback_total"
	OSCLimitedTotal            = "holo_osc_limited_total"
	OSCMessagesTotal           = "holo_osc_messages_total"
	OSCRepliesTotal            = "holo_osc_replies_total"
	OSCReplyBytesTotal         = "holo_osc_reply_bytes_total"
	OSCSubscribers             = "holo_osc_subscribers"
	OSCSubscribersDroppedTotal = "holo_osc_subscribers_dropped_total"
	OSCTCPConnections          = "holo_osc_tcp_connections"
	OSCTimedBundles            = "holo_osc_timed_bundles"
)

// RS485 lines (gateway/metrics/lines.go).
const (
	GatewayLineBadCRCTotal            = "holo_gateway_line_bad_crc_total"
	GatewayLineBoards                 = "holo_gateway_line_boards"
	GatewayLineBusySecondsTotal       = "holo_gateway_line_busy_seconds_total"
	GatewayLineGarbageTotal           = "holo_gateway_line_garbage_total"
	GatewayLinePollCycleSeconds       = "holo_gateway_line_poll_cycle_seconds"
	GatewayLinePollsTotal             = "holo_gateway_line_polls_total"
	GatewayLineReceiveBytesTotal      = "holo_gateway_line_receive_bytes_total"
	GatewayLineReceiveFramesTotal     = "holo_gateway_line_receive_frames_total"
	GatewayLineReceiveJSONLinesTotal  = "holo_gateway_line_receive_json_lines_total"
	GatewayLineRetriesTotal           = "holo_gateway_line_retries_total"
	GatewayLineTimeoutsTotal          = "holo_gateway_line_timeouts_total"
	GatewayLineTransmitBytesTotal     = "holo_gateway_line_transmit_bytes_total"
	GatewayLineTransmitFramesTotal    = "holo_gateway_line_transmit_frames_total"
	GatewayLineTransmitJSONLinesTotal = "holo_gateway_line_transmit_json_lines_total"
)

// Rollouts (gateway/rollout).
const (
	GatewayRolloutBoards         = "holo_gateway_rollout_boards"
	GatewayRolloutSentBytesTotal = "holo_gateway_rollout_sent_bytes_total"
	GatewayRolloutState          = "holo_gateway_rollout_state"
	GatewayRolloutWave           = "holo_gateway_rollout_wave"
	GatewayRolloutWaves          = "holo_gateway_rollout_waves"
	GatewayRolloutWindowOpen     = "holo_gateway_rollout_window_open"
)

// Timed fires (gateway/metrics/fires.go).
const (
	GatewayFireEarlyTotal      = "holo_gateway_fire_early_total"
	GatewayFireLatenessSeconds = "holo_gateway_fire_lateness_seconds"
	GatewayFireSkewSeconds     = "holo_gateway_fire_skew_seconds"
)

// All is every name above.
var All = []string{
	GatewayAPIRequestSeconds,
	GatewayAPIRequestsTotal,
	GatewayAuditAggregatedTotal,
	GatewayAuditDroppedTotal,
	GatewayAuditRecordsTotal,
	GatewayClusterBoards,
	GatewayClusterCoordinator,
	GatewayClusterEventsLostTotal,
	GatewayClusterEventsPending,
	GatewayClusterEventsPublishedTotal,
	GatewayClusterGatewayBoards,
	GatewayClusterGatewayHeartbeatAgeSeconds,
	GatewayClusterGatewayLines,
	GatewayClusterGatewayUp,
	GatewayClusterPartitioned,
	GatewayClusterReconnectsTotal,
	GatewayClusterRecordConflictsTotal,
	GatewayClusterRecordWritesTotal,
	GatewayClusterRoutedTotal,
	GatewayClusterStandbyBoards,
	GatewayClusterTakeoversTotal,
	GatewayCommandDurationSeconds,
	GatewayCommandFailuresTotal,
	CueFiresFailedTotal,
	CueFiresTotal,
	DMXArtPollTotal,
	DMXChangesFailedTotal,
	DMXChangesSentTotal,
	DMXCoalescedTotal,
	DMXDroppedTotal,
	DMXLatencySeconds,
	DMXLineSecondsTotal,
	DMXLineShare,
	DMXMergesTotal,
	DMXPacketsTotal,
	DMXSourcesLostTotal,
	DMXSyncPacketsTotal,
	GatewayBoardClockOffsetSeconds,
	GatewayBoardClockUncertaintySeconds,
	GatewayBoardEventsTotal,
	GatewayBoardGroup,
	GatewayBoardHeapFreeBytes,
	GatewayBoardInfo,
	GatewayBoardLastSeenTimestampSeconds,
	GatewayBoardLinkBadCRCTotal,
	GatewayBoardLinkBadFramesTotal,
	GatewayBoardLinkErrorsTotal,
	GatewayBoardLinkFramesTotal,
	GatewayBoardLinkGarbageTotal,
	GatewayBoardLinkJSONLinesTotal,
	GatewayBoardLinkOverrunsTotal,
	GatewayBoardLinkReceiveBytesTotal,
	GatewayBoardLinkTimeoutsTotal,
	GatewayBoardLinkTransmitBytesTotal,
	GatewayBoardLinkTransmitDroppedTotal,
	GatewayBoardOnline,
	GatewayBoardReachable,
	GatewayBoardUptimeSeconds,
	GatewayBoardWiFiRSSIDBm,
	GatewayBoards,
	GatewayBuildInfo,
	GatewayEventWatchers,
	GatewayEventsDroppedTotal,
	GatewayEventsDuplicateTotal,
	GatewayEventsPublishedTotal,
	GatewayEventsReceivedTotal,
	GatewayEventsReplayMissedTotal,
	GatewayEventsUnattributedTotal,
	GatewayRegistryWriteErrorsTotal,
	GatewayInstallationBoardInSync,
	GatewayInstallationBoards,
	GatewayInstallationHealsTotal,
	GatewayInstallationRevision,
	MQTTCommandsTotal,
	MQTTConnected,
	MQTTConnectsTotal,
	MQTTDroppedTotal,
	MQTTHappeningsTotal,
	MQTTPublishLatencySeconds,
	MQTTPublishedTotal,
	MQTTQueuedTotal,
	MQTTRetriesTotal,
	MQTTSpilledTotal,
	MQTTSpoolMessages,
	OSCBundlesRefusedTotal,
	OSCFeedbackTotal,
	OSCLimitedTotal,
	OSCMessagesTotal,
	OSCRepliesTotal,
	OSCReplyBytesTotal,
	OSCSubscribers,
	OSCSubscribersDroppedTotal,
	OSCTCPConnections,
	OSCTimedBundles,
	GatewayLineBadCRCTotal,
	GatewayLineBoards,
	GatewayLineBusySecondsTotal,
	GatewayLineGarbageTotal,
	GatewayLinePollCycleSeconds,
	GatewayLinePollsTotal,
	GatewayLineReceiveBytesTotal,
	GatewayLineReceiveFramesTotal,
	GatewayLineReceiveJSONLinesTotal,
	GatewayLineRetriesTotal,
	GatewayLineTimeoutsTotal,
	GatewayLineTransmitBytesTotal,
	GatewayLineTransmitFramesTotal,
	GatewayLineTransmitJSONLinesTotal,
	GatewayRolloutBoards,
	GatewayRolloutSentBytesTotal,
	GatewayRolloutState,
	GatewayRolloutWave,
	GatewayRolloutWaves,
	GatewayRolloutWindowOpen,
	GatewayFireEarlyTotal,
	GatewayFireLatenessSeconds,
	GatewayFireSkewSeconds,
}
