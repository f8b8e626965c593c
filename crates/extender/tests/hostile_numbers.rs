//! An extender's answers with extreme numbers (docs/RELIABILITY.md,
//! "Hostile numbers"): decoding never panics, and a score is taken only
//! when it is an integer from 0 to 10; anything else is an error saying so.

use engine::testing::extremes;
use gpu_scheduler_extender::{decode_bind, decode_filter, decode_prioritize};
use proptest::prelude::*;

/// A JSON token for a number: the shared extremes (some are not JSON at
/// all), any integer or float as text, or a huge exponent.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(extremes::NUMBERS).prop_map(String::from),
        any::<i128>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:e}")),
        (any::<i64>(), -400i32..400).prop_map(|(m, e)| format!("{m}e{e}")),
    ]
}

proptest! {
    #[test]
    fn prioritize_takes_only_scores_from_0_to_10(score in number(), other in 0i64..=10) {
        let body = format!(r#"[{{"Host": "a", "Score": {other}}}, {{"Host": "b", "Score": {score}}}]"#);
        let in_range = score.parse::<i64>().is_ok_and(|s| (0..=10).contains(&s)) || score.parse::<f64>() == Ok(0.0);
        match decode_prioritize(&body) {
            Ok(scores) => {
                prop_assert!(in_range, "{score} taken");
                prop_assert!(scores.iter().all(|(_, s)| (0..=10).contains(s)));
            }
            Err(e) => prop_assert!(!in_range && !e.is_empty(), "{score}: {e}"),
        }
    }

    #[test]
    fn filter_and_bind_answers_with_numbers_anywhere_are_decoded_or_refused(n in number(), cache in any::<bool>()) {
        for body in [
            format!(r#"{{"NodeNames": [{n}], "FailedNodes": {{"x": {n}}}, "Error": ""}}"#),
            format!(r#"{{"Nodes": {{"items": [{{"metadata": {{"name": {n}}}}}]}}}}"#),
            format!(r#"{{"Error": {n}}}"#),
            n.clone(),
        ] {
            let _ = decode_filter(&body, cache);
            let _ = decode_bind(&body);
            let _ = decode_prioritize(&body);
        }
    }
}

#[test]
fn an_out_of_range_score_names_the_host_and_the_range() {
    let e = decode_prioritize(r#"[{"Host": "n1", "Score": 100}]"#).unwrap_err();
    assert_eq!(e, r#"[0] (host "n1"): Score must be an integer from 0 to 10, got 100"#);
    let e = decode_prioritize(r#"[{"Host": "n1", "Score": 1e308}]"#).unwrap_err();
    assert!(e.contains("from 0 to 10"), "{e}");
    assert_eq!(decode_prioritize(r#"[{"Host": "n1", "Score": 10}, {"Host": "n2"}]"#), Ok(vec![("n1".into(), 10)]));
}
