// Integer formats: symmetric and affine int2..int8, plus calibration searches.
export const INT_FAMILY: i32 = 1;
