//! Generates the gRPC code for `protos/` at build time with a vendored `protoc`, and the
//! descriptor set that server reflection serves.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY-free: build scripts run single-threaded before any other code here.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // Both services encode through `codec::SizedProstCodec`: each message into room
    // reserved for all of it, not a buffer grown (and copied) as it is written.
    tonic_prost_build::configure()
        .codec_path("crate::codec::SizedProstCodec")
        .bytes(".shale.v1")
        .file_descriptor_set_path(out.join("shale_v1_descriptor.bin"))
        .compile_protos(&["protos/shale/v1/shale.proto"], &["protos"])?;
    // The internal API between roles.
    tonic_prost_build::configure()
        .codec_path("crate::codec::SizedProstCodec")
        .compile_protos(&["protos/shale/metadata/v1/metadata.proto"], &["protos"])?;
    // S2's record messages: plain prost, no services; bytes fields are `Bytes`, so a
    // decoded body shares the frame it came in and an encoded one is not copied first.
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .bytes(".")
        .compile_protos(&["protos/s2/v1/s2.proto"], &["protos"])?;
    println!("cargo:rerun-if-changed=protos");
    Ok(())
}
