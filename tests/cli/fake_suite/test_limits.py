from checks import check, verdict

from runlane_conformance.fixtures.evidence import record_limit


def measured(driver, name):
    value = getattr(driver.profile.limits, name)
    record_limit(name, accepted=value)
    record_limit(name, rejected=value + 1)


LIMITS = ("point-reads", "query-results", "transaction-records", "record-bytes", "transaction-bytes")


@check("limits.point-reads-boundary")
def test_point_reads_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)
    measured(driver, "max_point_reads")


@check("limits.query-results-boundary")
def test_query_results_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)
    measured(driver, "max_query_results")


@check("limits.transaction-records-boundary")
def test_transaction_records_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)
    measured(driver, "max_transaction_records")


@check("limits.record-bytes-boundary")
def test_record_bytes_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)
    measured(driver, "max_record_bytes")


@check("limits.transaction-bytes-boundary")
def test_transaction_bytes_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)
    measured(driver, "max_transaction_bytes")
