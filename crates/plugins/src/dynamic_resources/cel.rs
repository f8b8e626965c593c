//! CEL for device selectors, as kube's `dynamic-resource-allocation/cel`:
//! one variable, `device`, with `driver`, `allowMultipleAllocations`,
//! `attributes[domain][id]` and `capacity[domain][id]` (an unqualified
//! name is in the driver's domain; a domain the device lacks reads as an
//! empty map), and Kubernetes' quantity and semver libraries.
//!
//! Programs are compiled once per expression; a selector's verdict on a
//! device is kept until the slices or classes change (it depends on
//! nothing else), so a device is judged once, not once per node and pod.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cel::common::traits::{Container, Indexer};
use cel::common::types::{CelBool, CelDouble, CelInt, CelMap, CelMapKey, CelString, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, ExecutionError, Program, Value};
use framework::dra::{Attribute, Device, DeviceId};
use framework::quantity::Quantity as Amount;

/// Why a selector could not be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorError {
    Compile(String),
    Runtime(String),
}

/// A selector compiled, or why it does not compile.
type Compiled = Arc<Result<Program, String>>;

/// Verdicts by expression and device, for one devices generation.
#[derive(Default)]
struct Verdicts {
    generation: u64,
    by_expr: HashMap<Arc<str>, HashMap<DeviceId, bool>>,
}

/// Compiled selectors and their verdicts.
pub struct DeviceCel {
    env: Arc<Env>,
    programs: Mutex<HashMap<Arc<str>, Compiled>>,
    verdicts: Mutex<Verdicts>,
}

impl Default for DeviceCel {
    fn default() -> Self {
        DeviceCel::new()
    }
}

impl DeviceCel {
    pub fn new() -> Self {
        DeviceCel { env: Arc::new(env()), programs: Mutex::default(), verdicts: Mutex::default() }
    }

    fn program(&self, expr: &str) -> Compiled {
        let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = programs.get(expr) {
            return p.clone();
        }
        let compiled = Arc::new(self.env.compile(expr).map_err(|e| {
            e.errors.first().map_or_else(|| e.to_string(), |first| format!("{} (column {})", first.msg, first.pos.1))
        }));
        programs.insert(Arc::from(expr), compiled.clone());
        compiled
    }

    /// Whether `device` of `driver` satisfies `expr`; verdicts are kept for
    /// `generation` (of the slices and classes).
    pub fn matches(&self, expr: &str, id: &DeviceId, device: &Device, generation: u64) -> Result<bool, SelectorError> {
        {
            let mut v = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
            if v.generation != generation {
                *v = Verdicts { generation, by_expr: HashMap::new() };
            }
            if let Some(m) = v.by_expr.get(expr).and_then(|d| d.get(id)) {
                return Ok(*m);
            }
        }
        let program = self.program(expr);
        let program = match program.as_ref() {
            Ok(p) => p,
            Err(e) => return Err(SelectorError::Compile(e.clone())),
        };
        let value = device_value(&id.driver, device);
        let vars = Vars { device: &value };
        let mut ctx = Context::with_env(self.env.clone());
        ctx.set_variable_resolver(&vars);
        let verdict = match program.execute(&ctx) {
            Ok(Value::Bool(b)) => b,
            Ok(other) => {
                return Err(SelectorError::Runtime(format!(
                    "CEL result of type {} could not be converted to bool",
                    kind_name(&other)
                )));
            }
            Err(e) => return Err(SelectorError::Runtime(e.to_string())),
        };
        let mut v = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        if v.generation == generation {
            v.by_expr.entry(Arc::from(expr)).or_default().insert(id.clone(), verdict);
        }
        Ok(verdict)
    }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Null => "null_type",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        _ => "value",
    }
}

struct Vars<'a> {
    device: &'a CelMap<'static>,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == "device").then(|| CowVal::Borrowed(self.device as &dyn Val))
    }
}

/// The `device` variable.
fn device_value(driver: &str, device: &Device) -> CelMap<'static> {
    let mut attributes: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>> = HashMap::new();
    for (name, a) in &device.attributes {
        let (domain, id) = qualified(name, driver);
        let v: Box<dyn Val> = match a {
            Attribute::Int(i) => Box::new(CelInt::from(*i)),
            Attribute::Bool(b) => Box::new(CelBool::from(*b)),
            Attribute::String(s) => Box::new(CelString::from(s.clone())),
            Attribute::Version(s) => match semver::Version::parse(s) {
                Ok(v) => Box::new(Semver(v)),
                // Converted slices hold valid versions only.
                Err(_) => Box::new(CelString::from(s.clone())),
            },
        };
        attributes.entry(domain).or_default().insert(CelMapKey::String(CelString::from(id)), v);
    }
    let mut capacity: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>> = HashMap::new();
    for (name, q) in &device.capacity {
        let (domain, id) = qualified(name, driver);
        capacity.entry(domain).or_default().insert(CelMapKey::String(CelString::from(id)), Box::new(Quantity(*q)));
    }
    let domains = |m: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>>| -> Box<dyn Val> {
        Box::new(Domains(m.into_iter().map(|(k, v)| (k, CelMap::from(v))).collect()))
    };
    let mut top: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::new();
    let key = |k: &str| CelMapKey::String(CelString::from(k.to_string()));
    top.insert(key("driver"), Box::new(CelString::from(driver.to_string())));
    top.insert(key("allowMultipleAllocations"), Box::new(CelBool::from(false)));
    top.insert(key("attributes"), domains(attributes));
    top.insert(key("capacity"), domains(capacity));
    CelMap::from(top)
}

/// `domain/id`, or the driver's domain for an unqualified name.
fn qualified(name: &str, driver: &str) -> (String, String) {
    match name.split_once('/') {
        Some((d, id)) => (d.to_string(), id.to_string()),
        None => (driver.to_string(), name.to_string()),
    }
}

// ------------------------------------------------------------- domains map

static DOMAINS: Type = Type::new_unspecified_type("map");

/// `device.attributes` / `device.capacity`: maps by domain, where a domain
/// the device lacks is an empty map (so `device.attributes["x"].y` is a
/// missing key, which `has()` tests, not a missing domain).
#[derive(Debug, Clone)]
struct Domains(HashMap<String, CelMap<'static>>);

impl Val for Domains {
    fn get_type(&self) -> &Type {
        &DOMAINS
    }

    fn cel_type() -> &'static Type {
        &DOMAINS
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Domains>().is_some_and(|o| {
            o.0.len() == self.0.len()
                && self.0.iter().all(|(k, v)| o.0.get(k).is_some_and(|w| (v as &dyn Val).equals(w)))
        })
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Domains {}

impl Indexer for Domains {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let Some(key) = idx.downcast_ref::<CelString>() else {
            return Err(ExecutionError::UnexpectedType {
                got: idx.get_type().name().to_owned(),
                want: "string".to_owned(),
            });
        };
        Ok(match self.0.get(key.inner()) {
            Some(m) => CowVal::Borrowed(m as &dyn Val),
            None => CowVal::owned(CelMap::default()),
        })
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Container for Domains {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(value.downcast_ref::<CelString>().is_some_and(|k| self.0.contains_key(k.inner())))
    }
}

// ---------------------------------------------------------------- quantity

static QUANTITY: Type = Type::new_unspecified_type("kubernetes.Quantity");

/// Kubernetes' CEL quantity (`quantity("10Gi")`, `capacity[..].memory`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantity(pub Amount);

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        &QUANTITY
    }

    fn cel_type() -> &'static Type {
        &QUANTITY
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Quantity>().is_some_and(|o| o.0 == self.0)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(*self)
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Quantity {}

fn quantity(s: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    Amount::parse(s.inner()).map(Quantity).map_err(|e| ExecutionError::function_error("quantity", e))
}

fn is_quantity(s: &CelString<'_>) -> CelBool {
    CelBool::from(Amount::parse(s.inner()).is_ok())
}

fn q_sign(q: &Quantity) -> CelInt {
    CelInt::from(q.0.signum())
}

fn q_is_integer(q: &Quantity) -> CelBool {
    CelBool::from(q.0.is_whole())
}

fn q_as_integer(q: &Quantity) -> Result<CelInt, ExecutionError> {
    let v = q.0.value();
    if !q.0.is_whole() || v == i64::MAX || v == i64::MIN {
        return Err(ExecutionError::function_error("asInteger", "cannot convert value to integer"));
    }
    Ok(CelInt::from(v))
}

fn q_as_float(q: &Quantity) -> CelDouble {
    CelDouble::from(q.0.as_f64())
}

fn q_add(a: &Quantity, b: &Quantity) -> Quantity {
    Quantity(a.0.saturating_add(b.0))
}

fn q_add_int(a: &Quantity, b: &CelInt) -> Quantity {
    Quantity(a.0.saturating_add(Amount::from_value(*b.inner())))
}

fn q_sub(a: &Quantity, b: &Quantity) -> Quantity {
    Quantity(a.0.saturating_sub(b.0))
}

fn q_sub_int(a: &Quantity, b: &CelInt) -> Quantity {
    Quantity(a.0.saturating_sub(Amount::from_value(*b.inner())))
}

fn q_less(a: &Quantity, b: &Quantity) -> CelBool {
    CelBool::from(a.0 < b.0)
}

fn q_greater(a: &Quantity, b: &Quantity) -> CelBool {
    CelBool::from(a.0 > b.0)
}

fn q_compare(a: &Quantity, b: &Quantity) -> CelInt {
    CelInt::from(ordering(a.0.cmp(&b.0)))
}

fn ordering(o: Ordering) -> i64 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

// ------------------------------------------------------------------ semver

static SEMVER: Type = Type::new_unspecified_type("kubernetes.Semver");

/// Kubernetes' CEL semver (`semver("1.2.3")`, version attributes).
#[derive(Debug, Clone, PartialEq)]
pub struct Semver(pub semver::Version);

impl Val for Semver {
    fn get_type(&self) -> &Type {
        &SEMVER
    }

    fn cel_type() -> &'static Type {
        &SEMVER
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Semver>().is_some_and(|o| o.0 == self.0)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Semver {}

fn semver_of(s: &CelString<'_>) -> Result<Semver, ExecutionError> {
    semver::Version::parse(s.inner()).map(Semver).map_err(|e| ExecutionError::function_error("semver", e))
}

fn is_semver(s: &CelString<'_>) -> CelBool {
    CelBool::from(semver::Version::parse(s.inner()).is_ok())
}

fn v_major(v: &Semver) -> CelInt {
    CelInt::from(i64::try_from(v.0.major).unwrap_or(i64::MAX))
}

fn v_minor(v: &Semver) -> CelInt {
    CelInt::from(i64::try_from(v.0.minor).unwrap_or(i64::MAX))
}

fn v_patch(v: &Semver) -> CelInt {
    CelInt::from(i64::try_from(v.0.patch).unwrap_or(i64::MAX))
}

fn v_less(a: &Semver, b: &Semver) -> CelBool {
    CelBool::from(a.0.cmp_precedence(&b.0) == Ordering::Less)
}

fn v_greater(a: &Semver, b: &Semver) -> CelBool {
    CelBool::from(a.0.cmp_precedence(&b.0) == Ordering::Greater)
}

fn v_compare(a: &Semver, b: &Semver) -> CelInt {
    CelInt::from(ordering(a.0.cmp_precedence(&b.0)))
}

/// The standard library, the strings extension, and the two libraries.
fn env() -> Env {
    let mut env = Env::stdlib().with_optional_support(true);
    // Each registration adds a name the stdlib does not have; a clash
    // would only lose that one function, so the errors are not fatal.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(libraries);
    env
}

fn libraries(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_type(QUANTITY.to_owned())?;
    env.add_type(SEMVER.to_owned())?;
    cel::add_overload!(env, fn quantity: (CelString) -> Result<Quantity>, name = "quantity")?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool, name = "isQuantity")?;
    cel::add_member_overload!(env, fn q_sign: (Quantity) -> CelInt, name = "sign")?;
    cel::add_member_overload!(env, fn q_is_integer: (Quantity) -> CelBool, name = "isInteger")?;
    cel::add_member_overload!(env, fn q_as_integer: (Quantity) -> Result<CelInt>, name = "asInteger")?;
    cel::add_member_overload!(env, fn q_as_float: (Quantity) -> CelDouble, name = "asApproximateFloat")?;
    cel::add_member_overload!(env, fn q_add: (Quantity, Quantity) -> Quantity, name = "add")?;
    cel::add_member_overload!(env, fn q_add_int: (Quantity, CelInt) -> Quantity, name = "add")?;
    cel::add_member_overload!(env, fn q_sub: (Quantity, Quantity) -> Quantity, name = "sub")?;
    cel::add_member_overload!(env, fn q_sub_int: (Quantity, CelInt) -> Quantity, name = "sub")?;
    cel::add_member_overload!(env, fn q_less: (Quantity, Quantity) -> CelBool, name = "isLessThan")?;
    cel::add_member_overload!(env, fn q_greater: (Quantity, Quantity) -> CelBool, name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn q_compare: (Quantity, Quantity) -> CelInt, name = "compareTo")?;
    cel::add_overload!(env, fn semver_of: (CelString) -> Result<Semver>, name = "semver")?;
    cel::add_overload!(env, fn is_semver: (CelString) -> CelBool, name = "isSemver")?;
    cel::add_member_overload!(env, fn v_major: (Semver) -> CelInt, name = "major")?;
    cel::add_member_overload!(env, fn v_minor: (Semver) -> CelInt, name = "minor")?;
    cel::add_member_overload!(env, fn v_patch: (Semver) -> CelInt, name = "patch")?;
    cel::add_member_overload!(env, fn v_less: (Semver, Semver) -> CelBool, name = "isLessThan")?;
    cel::add_member_overload!(env, fn v_greater: (Semver, Semver) -> CelBool, name = "isGreaterThan")?;
    cel::add_member_overload!(env, fn v_compare: (Semver, Semver) -> CelInt, name = "compareTo")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn gpu() -> (DeviceId, Device) {
        let mut attributes = BTreeMap::new();
        attributes.insert("model".to_string(), Attribute::String("a100".into()));
        attributes.insert("index".to_string(), Attribute::Int(3));
        attributes.insert("driverVersion".to_string(), Attribute::Version("550.54.15".into()));
        attributes.insert("numa.example.com/node".to_string(), Attribute::Int(1));
        attributes.insert("mig".to_string(), Attribute::Bool(false));
        let mut capacity = BTreeMap::new();
        capacity.insert("memory".to_string(), Amount::parse("40Gi").expect("quantity"));
        let device = Device {
            name: "gpu-3".into(),
            attributes,
            capacity,
            taints: Vec::new(),
            scope: None,
            has_binding_conditions: false,
            consumes_counters: false,
        };
        let id =
            DeviceId { driver: Arc::from("gpu.nvidia.com"), pool: Arc::from("node-a"), device: Arc::from("gpu-3") };
        (id, device)
    }

    #[test]
    fn selectors_read_the_device_as_kube_does() {
        let (id, d) = gpu();
        let cel = DeviceCel::new();
        let cases: &[(&str, Result<bool, &str>)] = &[
            ("device.driver == 'gpu.nvidia.com'", Ok(true)),
            ("device.attributes['gpu.nvidia.com'].model == 'a100'", Ok(true)),
            ("device.attributes['gpu.nvidia.com'].index > 2", Ok(true)),
            ("device.attributes['numa.example.com'].node == 1", Ok(true)),
            ("device.attributes['gpu.nvidia.com'].mig", Ok(false)),
            // A domain the device lacks is an empty map: has() is false.
            ("has(device.attributes['other.example.com'].model)", Ok(false)),
            ("'gpu.nvidia.com' in device.attributes", Ok(true)),
            ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) == 0", Ok(true)),
            ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('32Gi'))", Ok(true)),
            ("device.capacity['gpu.nvidia.com'].memory == quantity('40960Mi')", Ok(true)),
            ("quantity('1.5').isInteger()", Ok(false)),
            ("quantity('2k').asInteger() == 2000", Ok(true)),
            ("quantity('1Gi').add(1).sub(quantity('1')) == quantity('1Gi')", Ok(true)),
            ("isQuantity('12x') || quantity('1m').sign() != 1", Ok(false)),
            ("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('535.0.0'))", Ok(true)),
            ("device.attributes['gpu.nvidia.com'].driverVersion.major() == 550", Ok(true)),
            ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0')) && isSemver('1.2.3') && !isSemver('1.2')", Ok(true)),
            ("device.allowMultipleAllocations", Ok(false)),
            ("device.attributes['gpu.nvidia.com'].missing == 'x'", Err("runtime")),
            ("device.attributes['gpu.nvidia.com'].model", Err("runtime")),
            ("device.driver ==", Err("compile")),
        ];
        for (i, (expr, want)) in cases.iter().enumerate() {
            let got = cel.matches(expr, &id, &d, 1);
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{expr}"),
                (Err("runtime"), Err(SelectorError::Runtime(_))) => {}
                (Err("compile"), Err(SelectorError::Compile(_))) => {}
                _ => panic!("case {i} {expr}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn verdicts_are_kept_for_one_generation() {
        let (id, mut d) = gpu();
        let cel = DeviceCel::new();
        let expr = "device.attributes['gpu.nvidia.com'].model == 'a100'";
        assert_eq!(cel.matches(expr, &id, &d, 1), Ok(true));
        d.attributes.insert("model".into(), Attribute::String("h100".into()));
        assert_eq!(cel.matches(expr, &id, &d, 1), Ok(true), "the same generation answers from the cache");
        assert_eq!(cel.matches(expr, &id, &d, 2), Ok(false), "a new generation judges again");
    }
}
