//! Reading LoCoMo (Maharana et al., ACL 2024) in its published layout: a zip archive, a folder of
//! conversation files, or one JSON file.
//!
//! A conversation is a JSON object with `speaker_a`, `speaker_b`, `session_N` lists of turns (`speaker`,
//! `dia_id`, `text`), `session_N_date_time` strings such as `"1:56 pm on 8 May, 2023"` and `qa`
//! (`question`, `category`, `evidence`: turn ids). Both published shapes are read: the archive's, one
//! object per file with everything at the top level, and `locomo10.json`'s, an array of samples each with
//! `sample_id`, a `conversation` object and `qa`.
//!
//! Decisions:
//! - Conversations are in file order: archive entries and folder files sorted by name (the archive
//!   stores them in another order; sorted names are the order of the upstream `locomo10.json`). A
//!   single JSON file keeps its array order.
//! - Evidence ids are normalized: the data holds a few misspellings (`D:11:26`, `D30:05`, `D8:6; D9:17`),
//!   so each entry is split at `;`, `,` and spaces, and a token counts when it holds a `D` and exactly two
//!   numbers, written back as `D{session}:{turn}`. A token naming no turn (`D`) is dropped. A question
//!   keeps every evidence id it lists, even one that names no turn of the conversation (it can never be
//!   found; the paper counts it the same way).
//! - A session date that cannot be parsed leaves `activity_at` unknown: recorded times never stand in.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;

/// Most bytes read from one conversation file: the published ones are under 300 kB.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// One dialogue turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Its id, `D{session}:{turn}`.
    pub dia_id: String,
    /// Who said it.
    pub speaker: String,
    /// What was said.
    pub text: String,
}

/// One session: its turns and when it took place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The `N` of `session_N`.
    pub number: u32,
    /// The date as written, e.g. `1:56 pm on 8 May, 2023`.
    pub date_time: String,
    /// The same date in epoch milliseconds (UTC), when it parses.
    pub activity_at: Option<i64>,
    /// Its turns, in order.
    pub turns: Vec<Turn>,
}

/// One question and the turns that support its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The question.
    pub text: String,
    /// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub category: u8,
    /// Normalized evidence turn ids, deduplicated, in the data's order.
    pub evidence: Vec<String>,
}

/// One conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// `sample_id`, or else the file's stem.
    pub id: String,
    /// Its sessions, by number.
    pub sessions: Vec<Session>,
    /// Its questions, in the data's order.
    pub questions: Vec<Question>,
}

impl Conversation {
    /// Every turn with its session, in order.
    pub fn turns(&self) -> impl Iterator<Item = (&Session, &Turn)> {
        self.sessions
            .iter()
            .flat_map(|session| session.turns.iter().map(move |turn| (session, turn)))
    }

    /// The questions the retrieval figures count: categories 1 to 4 with some evidence (category 5 is
    /// adversarial: its evidence supports no answer).
    pub fn scored_questions(&self) -> impl Iterator<Item = &Question> {
        self.questions.iter().filter(|question| {
            (1..=4).contains(&question.category) && !question.evidence.is_empty()
        })
    }
}

/// Reads every conversation at `path`: a `.zip` archive, a folder of `.json` files, or one `.json`
/// file.
pub fn load(path: &Path) -> anyhow::Result<Vec<Conversation>> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if path.is_dir() {
        for entry in
            std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?
        {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") && entry.file_type()?.is_file() {
                files.push((name, read_bounded(std::fs::File::open(entry.path())?)?));
            }
        }
    } else if path.extension().is_some_and(|extension| extension == "zip") {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut archive = zip::ZipArchive::new(file).context("reading the zip archive")?;
        for index in 0..archive.len() {
            let entry = archive.by_index(index)?;
            let name = entry.name()?.into_owned();
            if entry.is_file() && name.ends_with(".json") {
                files.push((name, read_bounded(entry)?));
            }
        }
    } else {
        let bytes = read_bounded(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )?;
        return parse_file(&stem(&path.to_string_lossy()), &bytes);
    }
    files.sort_by(|left, right| file_name(&left.0).cmp(file_name(&right.0)));
    let mut conversations = Vec::new();
    for (name, bytes) in files {
        conversations
            .extend(parse_file(&stem(&name), &bytes).with_context(|| format!("reading {name}"))?);
    }
    if conversations.is_empty() {
        bail!("no LoCoMo conversation found at {}", path.display());
    }
    Ok(conversations)
}

fn read_bounded(reader: impl Read) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        bail!("a conversation file is larger than {MAX_FILE_BYTES} bytes");
    }
    Ok(bytes)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn stem(path: &str) -> String {
    let name = file_name(path);
    name.strip_suffix(".json").unwrap_or(name).to_owned()
}

/// Parses one file: a conversation object, or an array of samples.
pub fn parse_file(stem: &str, bytes: &[u8]) -> anyhow::Result<Vec<Conversation>> {
    let value: Value = serde_json::from_slice(bytes).context("not JSON")?;
    match value {
        Value::Array(samples) => samples
            .iter()
            .enumerate()
            .map(|(index, sample)| parse_sample(&format!("{stem}-{index}"), sample))
            .collect(),
        sample @ Value::Object(_) => Ok(vec![parse_sample(stem, &sample)?]),
        _ => bail!("a LoCoMo file holds an object or an array"),
    }
}

fn parse_sample(fallback_id: &str, sample: &Value) -> anyhow::Result<Conversation> {
    let id = sample
        .get("sample_id")
        .and_then(Value::as_str)
        .unwrap_or(fallback_id)
        .to_owned();
    let conversation = sample.get("conversation").unwrap_or(sample);
    let object = conversation
        .as_object()
        .context("the conversation is not an object")?;
    let mut sessions: BTreeMap<u32, Session> = BTreeMap::new();
    for (key, value) in object {
        let Some(number) = key
            .strip_prefix("session_")
            .and_then(|rest| rest.parse::<u32>().ok())
        else {
            continue;
        };
        let Some(turns) = value.as_array() else {
            continue;
        };
        let date_time = object
            .get(&format!("session_{number}_date_time"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let turns = turns
            .iter()
            .map(|turn| -> anyhow::Result<Turn> {
                let field = |name: &str| {
                    turn.get(name)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .with_context(|| format!("a turn of session {number} has no {name}"))
                };
                Ok(Turn {
                    dia_id: normalize_dia_id(&field("dia_id")?)
                        .with_context(|| format!("a turn id of session {number} is malformed"))?,
                    speaker: field("speaker")?,
                    text: field("text")?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        sessions.insert(
            number,
            Session {
                number,
                activity_at: parse_session_date(&date_time),
                date_time,
                turns,
            },
        );
    }
    let questions = sample
        .get("qa")
        .and_then(Value::as_array)
        .map(|questions| questions.iter().filter_map(parse_question).collect())
        .unwrap_or_default();
    Ok(Conversation {
        id,
        sessions: sessions.into_values().collect(),
        questions,
    })
}

fn parse_question(question: &Value) -> Option<Question> {
    let text = question.get("question")?.as_str()?.to_owned();
    let category = u8::try_from(question.get("category")?.as_u64()?).ok()?;
    let mut evidence: Vec<String> = Vec::new();
    for entry in question
        .get("evidence")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        for token in entry.split([';', ',', ' ']) {
            if let Some(id) = normalize_dia_id(token)
                && !evidence.contains(&id)
            {
                evidence.push(id);
            }
        }
    }
    Some(Question {
        text,
        category,
        evidence,
    })
}

/// `D{session}:{turn}` from a token holding a `D` and exactly two numbers (`D:11:26` and `D30:05` too).
pub fn normalize_dia_id(token: &str) -> Option<String> {
    let token = token.trim();
    if !token.starts_with('D') {
        return None;
    }
    let numbers: Vec<u64> = token
        .split(|character: char| !character.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().ok())
        .collect::<Option<_>>()?;
    match numbers.as_slice() {
        [session, turn] => Some(format!("D{session}:{turn}")),
        _ => None,
    }
}

/// `"1:56 pm on 8 May, 2023"` as epoch milliseconds (UTC), or `None` when it does not parse.
pub fn parse_session_date(text: &str) -> Option<i64> {
    let (time, date) = text.split_once(" on ")?;
    let (clock, meridiem) = time.trim().split_once(' ')?;
    let (hour, minute) = clock.split_once(':')?;
    let (mut hour, minute): (i64, i64) = (hour.parse().ok()?, minute.parse().ok()?);
    if !(1..=12).contains(&hour) || !(0..60).contains(&minute) {
        return None;
    }
    match meridiem.to_ascii_lowercase().as_str() {
        "am" => hour %= 12,
        "pm" => hour = hour % 12 + 12,
        _ => return None,
    }
    let mut parts = date.split([' ', ',']).filter(|part| !part.is_empty());
    let day: i64 = parts.next()?.parse().ok()?;
    let month = month_number(parts.next()?)?;
    let year: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000)
}

fn month_number(name: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let name = name.to_ascii_lowercase();
    MONTHS
        .iter()
        .position(|month| *month == name || (name.len() >= 3 && month.starts_with(&name)))
        .map(|index| index as i64 + 1)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dates_parse_to_utc_milliseconds() {
        // 2023-05-08T13:56:00Z.
        assert_eq!(
            parse_session_date("1:56 pm on 8 May, 2023"),
            Some(1_683_554_160_000)
        );
        // 12 am is midnight, 12 pm noon.
        assert_eq!(parse_session_date("12:00 am on 1 January, 1970"), Some(0));
        assert_eq!(
            parse_session_date("12:30 pm on 1 January, 1970"),
            Some(45_000_000)
        );
        assert_eq!(parse_session_date("sometime in May"), None);
        assert_eq!(parse_session_date("13:00 pm on 1 May, 2023"), None);
    }

    #[test]
    fn evidence_ids_are_normalized() {
        assert_eq!(normalize_dia_id("D1:3").as_deref(), Some("D1:3"));
        assert_eq!(normalize_dia_id("D:11:26").as_deref(), Some("D11:26"));
        assert_eq!(normalize_dia_id("D30:05").as_deref(), Some("D30:5"));
        assert_eq!(normalize_dia_id("D"), None);
        assert_eq!(normalize_dia_id("X1:2"), None);
        let question = parse_question(&serde_json::json!({
            "question": "q", "category": 1, "evidence": ["D8:6; D9:17", "D8:6"]
        }))
        .expect("a question");
        assert_eq!(question.evidence, ["D8:6", "D9:17"]);
    }
}
